// A peer that finished its part of a call and exited at once (with _exit,
// skipping ncclCommDestroy) is not a failure of the ranks still finishing
// that call, as long as what they need from it is already delivered
// (docs/reliability.md, src/host/dead_peer.h); a peer that exits before it
// delivered still fails them promptly, naming it. Processes over shm:
//   * FinishedPeer: three ranks; rank 1 sends to rank 0 (a message that fits
//     the FIFO, or one much larger whose last pieces are still in it), takes
//     part in a Reduce to root 0 or in an AllReduce, and _exits the moment
//     its call returns; rank 0 receives, in the same group, a message rank 2
//     sends 500 ms after its part, so it waits idle (and checks its peers)
//     after rank 1 has gone. The others succeed with the right data.
//   * DeadBeforeSending: rank 1 _exits instead of sending: rank 0's receive
//     fails with ncclRemoteError naming rank 1 within 2 s.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_runner.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExitCode = 42;

enum class Call { SmallSend, LargeSend, Reduce, AllReduce3 };

struct FinishCase {
  Call call;
  const char* name;
};

size_t countOf(Call c) {
  return c == Call::LargeSend ? size_t(4) << 20 : size_t(1) << 12;
}  // floats; 16 MiB is several FIFOs

constexpr int kRanks = 3, kLeaver = 1, kLate = 2;
constexpr int kLateMs = 500;  // rank 2 calls this much later, so rank 0 waits idle after the leaver has gone

RunOptions shmOptions() {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"CHORUS_TIMEOUT_MS", ""}, {"NCCL_SHM_DISABLE", "0"}};
  return opts;
}

float valueAt(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 997)); }

bool isSend(Call c) { return c == Call::SmallSend || c == Call::LargeSend; }

// This rank's part of case `c`: for the sends, rank 1 sends to rank 0.
ncclResult_t part(RankCtx& ctx, ncclComm_t comm, Call c, std::vector<float>& buf) {
  const size_t n = buf.size();
  switch (c) {
    case Call::SmallSend:
    case Call::LargeSend:
      if (ctx.rank == kLeaver) return ncclSend(buf.data(), n, ncclFloat32, 0, comm, nullptr);
      return ctx.rank == 0 ? ncclRecv(buf.data(), n, ncclFloat32, kLeaver, comm, nullptr) : ncclSuccess;
    case Call::Reduce:
      return ncclReduce(buf.data(), buf.data(), n, ncclFloat32, ncclSum, 0, comm, nullptr);
    case Call::AllReduce3:
      return ncclAllReduce(buf.data(), buf.data(), n, ncclFloat32, ncclSum, comm, nullptr);
  }
  return ncclInternalError;
}

// Rank 0 runs its part in one group with a receive (into `late`) of what
// rank 2 sends kLateMs after its own part: rank 0 is still waiting, idle,
// when rank 1 has finished and gone.
ncclResult_t runCall(RankCtx& ctx, ncclComm_t comm, Call c, std::vector<float>& buf, std::vector<float>& late) {
  if (ctx.rank == kLeaver) return part(ctx, comm, c, buf);
  if (ctx.rank == kLate) {
    if (ncclResult_t r = part(ctx, comm, c, buf); r != ncclSuccess) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
    return ncclSend(late.data(), late.size(), ncclFloat32, 0, comm, nullptr);
  }
  ncclGroupStart();
  part(ctx, comm, c, buf);
  ncclRecv(late.data(), late.size(), ncclFloat32, kLate, comm, nullptr);
  return ncclGroupEnd();
}

float expected(Call c, size_t i) {
  if (isSend(c)) return valueAt(kLeaver, i);
  float sum = 0;
  for (int r = 0; r < kRanks; ++r) sum += valueAt(r, i);
  return sum;
}

// Whether this rank holds what it must after the call.
bool checkResult(RankCtx& ctx, Call c, const std::vector<float>& got, const std::vector<float>& late) {
  if (ctx.rank == kLate || (ctx.rank != 0 && c != Call::AllReduce3)) return true;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == expected(c, i)) continue;
    ctx.fail("rank %d: element %zu is %g, expected %g", ctx.rank, i, got[i], expected(c, i));
    return false;
  }
  for (size_t i = 0; ctx.rank == 0 && i < late.size(); ++i) {
    if (late[i] == valueAt(kLate, i)) continue;
    ctx.fail("rank 0: element %zu of rank 2's message is %g, expected %g", i, late[i], valueAt(kLate, i));
    return false;
  }
  return true;
}

class FinishedPeer : public ::testing::TestWithParam<FinishCase> {};

TEST_P(FinishedPeer, ExitsAtOnceAndTheOthersSucceed) {
  const Call c = GetParam().call;
  auto outcomes = runProcessesRaw(
      kRanks,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        // A warm-up makes the connections, so the measured call finds them.
        std::vector<float> warm(16, 1.0f);
        if (!RANK_OK(ctx, ncclAllReduce(warm.data(), warm.data(), warm.size(), ncclFloat32, ncclSum, comm, nullptr)))
          return;
        std::vector<float> buf(countOf(c)), late(1 << 10);
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = valueAt(ctx.rank, i);
        for (size_t i = 0; i < late.size(); ++i) late[i] = ctx.rank == kLate ? valueAt(kLate, i) : 0.0f;
        const ncclResult_t res = runCall(ctx, comm, c, buf, late);
        if (ctx.rank == kLeaver) _exit(res == ncclSuccess ? kExitCode : 1);
        if (res != ncclSuccess)
          ctx.fail("rank %d: %s failed after the peer left: %s (%s)", ctx.rank, GetParam().name,
                   ncclGetErrorString(res), ncclGetLastError(nullptr));
        else
          checkResult(ctx, c, buf, late);
        ncclCommAbort(comm);  // destroy would wait for the leaver to finalize
      },
      shmOptions());
  ASSERT_EQ(outcomes.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    const ProcessOutcome& o = outcomes[static_cast<size_t>(r)];
    const int code = r == kLeaver ? kExitCode : 0;
    EXPECT_TRUE(o.exited && o.exitCode == code && o.messages.empty()) << "rank " << r << ": " << o.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Calls, FinishedPeer,
                         ::testing::Values(FinishCase{Call::SmallSend, "SmallSend"},
                                           FinishCase{Call::LargeSend, "LargeSend"}, FinishCase{Call::Reduce, "Reduce"},
                                           FinishCase{Call::AllReduce3, "AllReduce3"}),
                         [](const ::testing::TestParamInfo<FinishCase>& info) { return std::string(info.param.name); });

TEST(DeadBeforeSending, IsReportedWithin2sNamingIt) {
  const int victim = 1;
  auto outcomes = runProcessesRaw(
      2,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        std::vector<float> buf(1 << 12, 1.0f);
        if (!RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr)))
          return;
        if (ctx.rank == victim) _exit(kExitCode);
        const auto t0 = Clock::now();
        const ncclResult_t res = ncclRecv(buf.data(), buf.size(), ncclFloat32, victim, comm, nullptr);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        const std::string msg = ncclGetLastError(nullptr);
        if (res != ncclRemoteError)
          ctx.fail("rank 0: the receive returned %s, expected ncclRemoteError (%s)", ncclGetErrorString(res),
                   msg.c_str());
        if (ms > 2000) ctx.fail("rank 0: the dead peer was reported after %lld ms", (long long)ms);
        if (msg.find("rank " + std::to_string(victim)) == std::string::npos)
          ctx.fail("rank 0: the error \"%s\" does not name rank %d", msg.c_str(), victim);
        ncclCommAbort(comm);
      },
      shmOptions());
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[0].exited && outcomes[0].exitCode == 0 && outcomes[0].messages.empty())
      << outcomes[0].describe();
  EXPECT_TRUE(outcomes[1].exited && outcomes[1].exitCode == kExitCode) << outcomes[1].describe();
}

}  // namespace
}  // namespace chorus::test
