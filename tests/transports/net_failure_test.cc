// A rank on another "host" dies mid-job: the survivors' collectives must fail
// with ncclRemoteError within a few seconds (the broken TCP connections are
// noticed by the proxy), far sooner than CHORUS_TIMEOUT_MS, and aborting the
// communicator afterwards must not hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "net_test_util.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

ncclResult_t allReduce(ncclComm_t comm) {
  std::vector<float> buf(1 << 18, 1.0f);  // 1 MiB: several slots per ring step
  return ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
}

TEST(NetFailure, KilledRemotePeerFailsTheOthersQuickly) {
  const int n = 3, victim = 2;
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  // The timeout is long: only the broken connections can end the call in time.
  opts.env = {{"NCCL_SOCKET_IFNAME", "lo"}, {"CHORUS_TIMEOUT_MS", "30000"}};
  auto outcomes = runProcessesRaw(
      n,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!initOnHost(ctx, 1, &comm)) return;
        if (!RANK_OK(ctx, allReduce(comm))) return;  // connections exist
        // A call returns once this rank's part is done, which can be before its
        // proxy has sent the last slots to the others: give it time to deliver
        // them, so the others' first call completes and only the second fails.
        if (ctx.rank == victim) {
          usleep(300 * 1000);
          raise(SIGKILL);
        }
        const auto t0 = Clock::now();
        const ncclResult_t res = allReduce(comm);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        const std::string msg = ncclGetLastError(comm);
        if (res != ncclRemoteError)
          ctx.fail("rank %d: AllReduce with a killed peer returned %s, expected ncclRemoteError (%s)", ctx.rank,
                   ncclGetErrorString(res), msg.c_str());
        if (ms > 5000) ctx.fail("rank %d: the error took %lld ms (bound 5000 ms)", ctx.rank, (long long)ms);
        if (msg.find("peer rank") == std::string::npos)
          ctx.fail("rank %d: the error does not name a peer: %s", ctx.rank, msg.c_str());
        // Rank 0 receives from the victim on the ring: its error must name it.
        if (ctx.rank == 0 && msg.find("rank " + std::to_string(victim)) == std::string::npos)
          ctx.fail("rank 0: the error does not name rank %d: %s", victim, msg.c_str());
        const auto a0 = Clock::now();
        RANK_OK(ctx, ncclCommAbort(comm));
        const auto abortMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - a0).count();
        if (abortMs > 2000) ctx.fail("rank %d: ncclCommAbort took %lld ms", ctx.rank, (long long)abortMs);
      },
      opts);
  ASSERT_EQ(outcomes.size(), static_cast<size_t>(n));
  EXPECT_TRUE(!outcomes[victim].exited && outcomes[victim].signal == SIGKILL) << outcomes[victim].describe();
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    const ProcessOutcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_TRUE(o.exited && o.exitCode == 0 && o.messages.empty()) << "rank " << r << ": " << o.describe();
  }
}

}  // namespace
}  // namespace chorus::test
