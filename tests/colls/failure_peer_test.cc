// Peers that die, hang or misbehave. Every wait in the library is bounded
// (CHORUS_TIMEOUT_MS / CHORUS_INIT_TIMEOUT_MS) and watches the abort flag,
// so each scenario must end in an error code and a message, quickly:
//   * KilledPeer: a forked rank _exit()s or is SIGKILLed before or during a
//     collective; the survivors get ncclRemoteError/ncclSystemError within
//     the bound and the message names the dead rank.
//   * StuckPeer: a thread rank simply never makes the call; the others fail
//     after the timeout, naming it.
//   * AbortFromAnotherThread: ncclCommAbort ends a blocked call at once.
//   * InitTimeout: a rank that never shows up makes init fail, bounded.
//   * Stranger: garbage connections to the bootstrap port during init are
//     refused and init still succeeds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

int64_t msSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

constexpr size_t kCount = 1 << 18;  // 1 MiB of floats: several slots per step

// An AllReduce whose outcome the caller judges; buffers are scratch.
ncclResult_t plainAllReduce(ncclComm_t comm) {
  std::vector<float> buf(kCount, 1.0f);
  return ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
}

// The survivor's side: the call fails with a peer error, in time, naming `victim`.
void expectPeerFailure(RankCtx& ctx, ncclResult_t res, int64_t ms, int64_t boundMs, int victim, const char* what) {
  const std::string msg = ncclGetLastError(nullptr);
  if (res != ncclRemoteError && res != ncclSystemError)
    ctx.fail("rank %d: %s: returned %s, expected ncclRemoteError or ncclSystemError (%s)", ctx.rank, what,
             ncclGetErrorString(res), msg.c_str());
  if (ms > boundMs)
    ctx.fail("rank %d: %s: took %lld ms, bound %lld ms", ctx.rank, what, (long long)ms, (long long)boundMs);
  const std::string name = "rank " + std::to_string(victim);
  if (msg.find(name) == std::string::npos)
    ctx.fail("rank %d: %s: the error \"%s\" does not name the peer (\"%s\")", ctx.rank, what, msg.c_str(),
             name.c_str());
}

enum class Death { Exit, Kill, InsideCall, BeforeConnect };

class KilledPeer : public ::testing::TestWithParam<Death> {};

TEST_P(KilledPeer, SurvivorsFailFastNamingTheDeadRank) {
  const Death death = GetParam();
  const int n = 3, victim = 2;
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 30000;
  opts.env = {{"CHORUS_TIMEOUT_MS", "3000"}, {"CHORUS_INIT_TIMEOUT_MS", "10000"}};
  auto outcomes = runProcessesRaw(
      n,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        // Warm-up with the same shape: connectors exist, so the failure hits the data path.
        if (death != Death::BeforeConnect && !RANK_OK(ctx, plainAllReduce(comm))) return;
        if (ctx.rank == victim) {
          if (death == Death::Kill) raise(SIGKILL);
          if (death == Death::InsideCall) {
            // Dies while blocked in the call: the survivors arrive late.
            std::thread([] {
              std::this_thread::sleep_for(std::chrono::milliseconds(150));
              _exit(43);
            }).detach();
            plainAllReduce(comm);
          }
          _exit(42);
        }
        if (death == Death::InsideCall) std::this_thread::sleep_for(std::chrono::milliseconds(400));
        const auto t0 = Clock::now();
        const ncclResult_t res = plainAllReduce(comm);
        expectPeerFailure(ctx, res, msSince(t0), 2000, victim, "AllReduce with a dead peer");
        ncclCommAbort(comm);
      },
      opts);
  ASSERT_EQ(outcomes.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const ProcessOutcome& o = outcomes[static_cast<size_t>(r)];
    if (r == victim) {
      const bool ok = death == Death::Kill ? (!o.exited && o.signal == SIGKILL)
                                           : (o.exited && (o.exitCode == 42 || o.exitCode == 43));
      EXPECT_TRUE(ok) << "victim: " << o.describe();
      continue;
    }
    EXPECT_TRUE(o.exited && o.exitCode == 0 && o.messages.empty()) << "rank " << r << ": " << o.describe();
  }
}

std::string deathName(const ::testing::TestParamInfo<Death>& info) {
  switch (info.param) {
    case Death::Exit:
      return "Exit";
    case Death::Kill:
      return "SigKill";
    case Death::InsideCall:
      return "InsideCall";
    case Death::BeforeConnect:
      return "BeforeConnect";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(Deaths, KilledPeer,
                         ::testing::Values(Death::Exit, Death::Kill, Death::InsideCall, Death::BeforeConnect),
                         deathName);

class StuckPeer : public ::testing::TestWithParam<bool> {};

// Rank 1 never calls; rank 0 fails after CHORUS_TIMEOUT_MS (1 s), naming it.
TEST_P(StuckPeer, OthersTimeOutNamingIt) {
  const bool warm = GetParam();
  std::latch done(1);
  RunOptions opts;
  opts.env = {{"CHORUS_TIMEOUT_MS", "1000"}};
  runThreads(
      2,
      [&](RankCtx& ctx) {
        if (warm && !RANK_OK(ctx, plainAllReduce(ctx.comm))) return;
        if (ctx.rank == 1) {
          done.wait();
          return;
        }
        const auto t0 = Clock::now();
        const ncclResult_t res = plainAllReduce(ctx.comm);
        const int64_t ms = msSince(t0);
        expectPeerFailure(ctx, res, ms, 5000, 1, "AllReduce with a peer that never calls");
        if (ms < 900) ctx.fail("rank 0: failed after %lld ms, before the 1000 ms timeout", (long long)ms);
        ncclResult_t async = ncclSuccess;
        RANK_OK(ctx, ncclCommGetAsyncError(ctx.comm, &async));
        if (async == ncclSuccess) ctx.fail("rank 0: ncclCommGetAsyncError must report the failure");
        done.count_down();
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Connectors, StuckPeer, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "AfterWarmup" : "BeforeConnect");
                         });

// (warm: the call's connectors exist already; revoke: ncclCommRevoke, not ncclCommAbort)
class AbortFromAnotherThread : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// Rank 1 never joins; a watchdog aborts (or revokes) rank 0's communicator
// after 300 ms. The timeout is long (20 s), so only that can end the call,
// with ncclInvalidUsage naming it, whether the call waits in connection
// setup (its first call) or on its connectors.
TEST_P(AbortFromAnotherThread, EndsTheBlockedCall) {
  const auto [warm, revoke] = GetParam();
  std::latch done(1);
  RunOptions opts;
  opts.env = {{"CHORUS_TIMEOUT_MS", "20000"}};
  runThreads(
      2,
      [&](RankCtx& ctx) {
        if (warm && !RANK_OK(ctx, plainAllReduce(ctx.comm))) return;
        if (ctx.rank == 1) {
          done.wait();
          return;
        }
        ncclComm_t comm = ctx.comm;
        ncclResult_t abortRes = ncclInternalError;
        int64_t abortMs = -1;
        std::thread watchdog([&, revoke = revoke] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          const auto a0 = Clock::now();
          abortRes = revoke ? ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) : ncclCommAbort(comm);
          abortMs = msSince(a0);
        });
        const auto t0 = Clock::now();
        const ncclResult_t res = plainAllReduce(comm);
        const std::string why = ncclGetLastError(nullptr);
        const int64_t ms = msSince(t0);
        watchdog.join();
        if (!revoke) ctx.comm = nullptr;  // the abort freed it
        const char* by = revoke ? "ncclCommRevoke" : "ncclCommAbort";
        if (res != ncclInvalidUsage)
          ctx.fail("rank 0: the AllReduce ended by %s returned %s (%s)", by, ncclGetErrorString(res), why.c_str());
        if (why.find(std::string("operation ended by ") + by) == std::string::npos)
          ctx.fail("rank 0: the message does not name %s: %s", by, why.c_str());
        if (ms > 2300)
          ctx.fail("rank 0: the call returned %lld ms after it started; %s came at 300 ms", (long long)ms, by);
        if (abortRes != ncclSuccess) ctx.fail("rank 0: %s returned %s", by, ncclGetErrorString(abortRes));
        if (abortMs > 2000) ctx.fail("rank 0: %s itself took %lld ms", by, (long long)abortMs);
        done.count_down();
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Connectors, AbortFromAnotherThread, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
                           return std::string(std::get<0>(info.param) ? "AfterWarmup" : "BeforeConnect") +
                                  (std::get<1>(info.param) ? "_Revoke" : "_Abort");
                         });

TEST(InitTimeout, MissingRankFailsInitWithinBound) {
  RunOptions opts;
  opts.initComms = false;
  opts.env = {{"CHORUS_INIT_TIMEOUT_MS", "1000"}};
  runThreads(
      2,
      [](RankCtx& ctx) {
        if (ctx.rank == 1) return;  // never arrives
        ncclComm_t comm = nullptr;
        const auto t0 = Clock::now();
        const ncclResult_t res = ncclCommInitRank(&comm, 2, ctx.id, 0);
        const int64_t ms = msSince(t0);
        if (res == ncclSuccess) {
          ctx.fail("rank 0: init succeeded without rank 1");
          ncclCommDestroy(comm);
          return;
        }
        if (res != ncclRemoteError && res != ncclSystemError)
          ctx.fail("rank 0: init returned %s: %s", ncclGetErrorString(res), ncclGetLastError(nullptr));
        if (ms > 5000) ctx.fail("rank 0: init took %lld ms to fail, bound 5000", (long long)ms);
        if (comm != nullptr) ctx.fail("rank 0: a failed blocking init must leave *comm NULL");
      },
      opts);
}

// Connects to 127.0.0.1:port repeatedly with assorted garbage until `stop`.
void strangerLoop(int port, std::atomic<bool>* stop, std::vector<int>* held, int* attempts) {
  int round = 0;
  while (!stop->load()) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    ++*attempts;
    std::vector<unsigned char> junk(97);
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<unsigned char>(i * 37 + round);
    switch (round++ % 4) {
      case 0:
        (void)!write(fd, junk.data(), junk.size());
        close(fd);
        break;  // random bytes
      case 1:
        (void)!write(fd, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
        close(fd);
        break;  // absurd length
      case 2:
        held->push_back(fd);
        break;  // silent, held open
      case 3:
        (void)!write(fd, junk.data(), 5);
        held->push_back(fd);
        break;  // half a frame
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(Stranger, GarbageOnTheBootstrapPortDoesNotBreakInit) {
  const int port = freeLocalPort();
  ASSERT_GT(port, 0);
  ScopedEnv env({{"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port)}});
  std::atomic<bool> stop{false};
  std::vector<int> held;
  int attempts = 0;
  std::thread stranger;
  RunOptions opts;
  opts.afterLaunch = [&] { stranger = std::thread(strangerLoop, port, &stop, &held, &attempts); };
  opts.timeoutMs = 60000;
  opts.env = {{"CHORUS_BOOTSTRAP_STALL_MS", "300"}, {"CHORUS_INIT_TIMEOUT_MS", "20000"}};
  opts.initComms = false;
  runProcesses(
      3,
      [](RankCtx& ctx) {
        // Rank 0 serves the store at NCCL_COMM_ID; the others arrive late, amid the garbage.
        if (ctx.rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        Case c;
        c.coll = Coll::AllReduce;
        c.count = 1001;
        runCase(ctx, comm, c);
        // The store lives in rank 0's process: it leaves last. (Finalize followed
        // by an immediate exit of rank 0 is CommIdMode.ServingRankFinalizesFirst.)
        if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
  stop = true;
  if (stranger.joinable()) stranger.join();
  for (int fd : held) close(fd);
  EXPECT_GT(attempts, 0) << "the stranger never got a connection: the test proved nothing";
}

}  // namespace
}  // namespace chorus::test
