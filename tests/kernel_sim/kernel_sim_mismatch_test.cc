// Mismatched calls on the GPU path, with the kernels' own code on CPU
// threads (sim_rank.h): the fingerprints each slot carries
// (kernels/primitives/lane_failure.cuh) must stop every rank's kernel with a
// record naming both calls, promptly, instead of a hang or different wrong
// results (docs/reliability.md, "Operation fingerprints").
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <string>
#include <vector>

#include "kernel_sim/sim_checks.h"
#include "kernel_sim/sim_rank.h"

namespace chorus {
namespace {

using namespace chorus::test;

// Every rank runs one AllReduce; rank 0's differs by `differ`. Each rank's
// kernels must stop with an OpMismatch record within `kPromptS`, and each
// message must name both calls.
struct Mismatch {
  const char* name;
  size_t count0, count;  // rank 0's count, the others'
  ReduceKind kind0, kind;
  const char* call0;  // how the messages name rank 0's call and the others'
  const char* call;
};
class KernelOnCpuMismatch : public ::testing::TestWithParam<std::tuple<Mismatch, const char*>> {};

constexpr double kPromptS = 5.0;

TEST_P(KernelOnCpuMismatch, StopsEveryRankNamingBothCalls) {
  const auto [m, proto] = GetParam();
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", proto}};
  std::barrier ready(3);
  runThreads(
      3,
      [&, m = m](RankCtx& ctx) {
        SimRank sim(ctx, ready);
        // A matching call first: its connections are the ones the odd call
        // finds (a mismatch at connection setup is connectPlan's to find).
        {
          std::vector<float> in(m.count, 1.0f), out(m.count, 0.0f);
          Plan plan;
          plan.comm = ctx.comm;
          plan.tasks.push_back(
              simTask(ctx, CollType::AllReduce, ncclFloat32, sumOf(ncclFloat32), in.data(), out.data(), m.count));
          SimOutcome o;
          if (!sim.runKernels(plan, &o)) return;
          if (o.record.status != 0)
            ctx.fail("rank %d: the matching call failed: %s", ctx.rank, describe(o, ctx.rank).c_str());
        }
        const bool odd = ctx.rank == 0;
        const size_t count = odd ? m.count0 : m.count;
        std::vector<float> in(count, 1.0f), out(count, 0.0f);
        Plan plan;
        plan.comm = ctx.comm;
        plan.tasks.push_back(simTask(ctx, CollType::AllReduce, ncclFloat32,
                                     ReduceSpec{ncclFloat32, odd ? m.kind0 : m.kind, nullptr, 1}, in.data(), out.data(),
                                     count));
        SimOutcome o;
        const auto start = std::chrono::steady_clock::now();
        if (!sim.runKernels(plan, &o)) return;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (const std::string& f : o.faults) ctx.fail("rank %d: %s", ctx.rank, f.c_str());
        const std::string msg = describe(o, ctx.rank);
        if (o.record.status != static_cast<int32_t>(step::LaneStatus::OpMismatch))
          ctx.fail("rank %d: status %d after %.1f s, not a mismatch: %s", ctx.rank, o.record.status, seconds,
                   msg.c_str());
        else if (msg.find(m.call0) == std::string::npos || msg.find(m.call) == std::string::npos)
          ctx.fail("rank %d: the message does not name both calls (%s, %s): %s", ctx.rank, m.call0, m.call,
                   msg.c_str());
        if (seconds > kPromptS) ctx.fail("rank %d: stopped after %.1f s", ctx.rank, seconds);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(
    CountsAndOps, KernelOnCpuMismatch,
    ::testing::Combine(::testing::Values(Mismatch{"count", 1000, 2000, ReduceKind::Sum, ReduceKind::Sum,
                                                  "AllReduce(1000 x float, sum)", "AllReduce(2000 x float, sum)"},
                                         Mismatch{"op", 1000, 1000, ReduceKind::Max, ReduceKind::Sum,
                                                  "AllReduce(1000 x float, max)", "AllReduce(1000 x float, sum)"}),
                       ::testing::Values("Simple", "LL")),
    [](const auto& info) { return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace chorus
