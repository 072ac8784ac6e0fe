// A peer that finished its part of a call and exited at once (with _exit,
// skipping ncclCommDestroy) is not a failure of the ranks still finishing
// that call, as long as what they need from it is already delivered
// (docs/reliability.md, src/host/dead_peer.h); a peer that exits before it
// delivered still fails them promptly, naming it. Processes over shm:
//   * FinishedPeer: rank 1 sends (a message that fits the FIFO, received
//     after the sender is gone; one much larger than the FIFO, whose last
//     pieces are still in it), takes part in a Reduce to root 0, or in a
//     three-rank AllReduce, and _exits the moment its call returns: the
//     others succeed with the right data.
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

int ranksOf(Call c) { return c == Call::AllReduce3 ? 3 : 2; }
size_t countOf(Call c) {
  return c == Call::LargeSend ? size_t(4) << 20 : size_t(1) << 12;
}  // floats; 16 MiB is several FIFOs

RunOptions shmOptions() {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"CHORUS_TIMEOUT_MS", ""}, {"NCCL_SHM_DISABLE", "0"}};
  return opts;
}

float valueAt(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 997)); }

// The call of case `c` on this rank; the leaver _exits as soon as it returns.
ncclResult_t runCall(RankCtx& ctx, ncclComm_t comm, Call c, std::vector<float>& buf) {
  const size_t n = buf.size();
  switch (c) {
    case Call::SmallSend:
    case Call::LargeSend:
      if (ctx.rank == 1) return ncclSend(buf.data(), n, ncclFloat32, 0, comm, nullptr);
      // The small message is taken only after its sender has gone.
      if (c == Call::SmallSend) std::this_thread::sleep_for(std::chrono::milliseconds(400));
      return ncclRecv(buf.data(), n, ncclFloat32, 1, comm, nullptr);
    case Call::Reduce:
      return ncclReduce(buf.data(), buf.data(), n, ncclFloat32, ncclSum, 0, comm, nullptr);
    case Call::AllReduce3:
      return ncclAllReduce(buf.data(), buf.data(), n, ncclFloat32, ncclSum, comm, nullptr);
  }
  return ncclInternalError;
}

float expected(Call c, int nranks, size_t i) {
  if (c == Call::SmallSend || c == Call::LargeSend) return valueAt(1, i);
  float sum = 0;
  for (int r = 0; r < nranks; ++r) sum += valueAt(r, i);
  return sum;
}

class FinishedPeer : public ::testing::TestWithParam<FinishCase> {};

TEST_P(FinishedPeer, ExitsAtOnceAndTheOthersSucceed) {
  const Call c = GetParam().call;
  const int n = ranksOf(c), leaver = 1;
  auto outcomes = runProcessesRaw(
      n,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        // A warm-up makes the connections, so the measured call finds them.
        std::vector<float> warm(16, 1.0f);
        if (!RANK_OK(ctx, ncclAllReduce(warm.data(), warm.data(), warm.size(), ncclFloat32, ncclSum, comm, nullptr)))
          return;
        std::vector<float> buf(countOf(c));
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = valueAt(ctx.rank, i);
        const ncclResult_t res = runCall(ctx, comm, c, buf);
        if (ctx.rank == leaver) _exit(res == ncclSuccess ? kExitCode : 1);
        if (res != ncclSuccess) {
          ctx.fail("rank %d: %s failed after the peer left: %s (%s)", ctx.rank, GetParam().name,
                   ncclGetErrorString(res), ncclGetLastError(nullptr));
        } else if (ctx.rank == 0 || c == Call::AllReduce3) {
          for (size_t i = 0; i < buf.size(); ++i) {
            if (buf[i] == expected(c, n, i)) continue;
            ctx.fail("rank %d: element %zu is %g, expected %g", ctx.rank, i, buf[i], expected(c, n, i));
            break;
          }
        }
        ncclCommAbort(comm);  // destroy would wait for the leaver to finalize
      },
      shmOptions());
  ASSERT_EQ(outcomes.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const ProcessOutcome& o = outcomes[static_cast<size_t>(r)];
    const int code = r == leaver ? kExitCode : 0;
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
