// How the kernels wait (kernels/primitives/wait.cuh), with their own code on
// CPU threads (sim_rank.h): a late peer is waited for as long as it takes
// when no limit is set (the default, docs/reliability.md); the abort flag
// the GPU executor sets (ncclCommAbort, a dead peer) stops every waiting
// lane; the opt-in limit (CHORUS_TIMEOUT_MS) stops a lane that waited that
// long without progress.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernel_sim/sim_checks.h"
#include "kernel_sim/sim_rank.h"

namespace chorus {
namespace {

using namespace chorus::test;

constexpr int kRanks = 3;
constexpr size_t kCount = 40000;  // several pieces per ring step

// One ring all-reduce of ones on every rank, rank 1 starting its kernels
// `lateMs` after the others, with the kernels' limit `timeoutNs` and abort
// flag `abortFlag`; then check(ctx, what the kernels left, the result, the
// call's seconds) on each rank.
template <typename Check>
void lateAllReduce(int lateMs, uint64_t timeoutNs, const volatile int32_t* abortFlag, Check check) {
  std::barrier ready(kRanks);
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", "Ring"}};
  runThreads(
      kRanks,
      [&](RankCtx& ctx) {
        SimRank sim(ctx, ready);
        sim.timeoutNs = timeoutNs;
        sim.abortFlag = abortFlag;
        if (ctx.rank == 1) sim.lateMs = lateMs;
        std::vector<float> in(kCount, 1.0f), out(kCount, 0.0f);
        Plan plan;
        plan.comm = ctx.comm;
        plan.tasks.push_back(
            simTask(ctx, CollType::AllReduce, ncclFloat32, sumOf(ncclFloat32), in.data(), out.data(), kCount));
        SimOutcome o;
        const auto start = std::chrono::steady_clock::now();
        if (!sim.runKernels(plan, &o)) return;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (const std::string& f : o.faults) ctx.fail("rank %d: %s", ctx.rank, f.c_str());
        check(ctx, o, out, seconds);
      },
      opts);
}

// No limit (timeoutNs 0): the others wait the 2 s for rank 1 and succeed.
TEST(KernelOnCpuWaits, ALatePeerIsWaitedForWithoutALimit) {
  lateAllReduce(2000, 0, nullptr, [](RankCtx& ctx, const SimOutcome& o, const std::vector<float>& out, double s) {
    if (o.record.status != 0) {
      ctx.fail("rank %d: a late peer failed the call: %s", ctx.rank, describe(o, ctx.rank).c_str());
      return;
    }
    expectExact(ctx, o, out, std::vector<float>(kCount, float(kRanks)), "late all-reduce");
    if (ctx.rank != 1 && s < 1.9) ctx.fail("rank %d: done after %.2f s, before rank 1 came", ctx.rank, s);
  });
}

// The abort flag set while the others wait for rank 1: every waiting lane
// stops, promptly, with an Aborted record; the late rank, which finds the
// flag set, stops too.
TEST(KernelOnCpuWaits, TheAbortFlagStopsEveryWaitingLane) {
  volatile int32_t abortWord = 0;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    abortWord = 1;
  });
  lateAllReduce(1500, 0, &abortWord, [](RankCtx& ctx, const SimOutcome& o, const std::vector<float>&, double s) {
    if (o.record.status != static_cast<int32_t>(step::LaneStatus::Aborted))
      ctx.fail("rank %d: status %d, not aborted: %s", ctx.rank, o.record.status, describe(o, ctx.rank).c_str());
    const double limit = ctx.rank == 1 ? 3.0 : 1.5;  // the flag is set at 0.3 s
    if (s > limit) ctx.fail("rank %d: stopped after %.2f s", ctx.rank, s);
  });
  aborter.join();
}

// The opt-in limit: a lane that waited timeoutNs without a piece moving
// stops with a TimedOut record naming the rank it waited on.
TEST(KernelOnCpuWaits, TheOptInLimitStopsAWaitWithNoProgress) {
  lateAllReduce(1500, 300'000'000, nullptr, [](RankCtx& ctx, const SimOutcome& o, const std::vector<float>&, double s) {
    if (o.record.status != static_cast<int32_t>(step::LaneStatus::TimedOut)) {
      ctx.fail("rank %d: status %d, not timed out: %s", ctx.rank, o.record.status, describe(o, ctx.rank).c_str());
      return;
    }
    const std::string msg = describe(o, ctx.rank);
    if (o.record.peer < 0 || o.record.peer == ctx.rank ||
        msg.find("rank " + std::to_string(o.record.peer)) == std::string::npos)
      ctx.fail("rank %d: the message does not name the rank waited on (%d): %s", ctx.rank, o.record.peer, msg.c_str());
    if (ctx.rank != 1 && s > 1.4) ctx.fail("rank %d: stopped after %.2f s", ctx.rank, s);
  });
}

}  // namespace
}  // namespace chorus
