// Teardown delivers: a rank that makes its last call, destroys its
// communicator and exits at once must not make a peer that is still
// receiving fail (ncclCommDestroy finalizes first, see core/comm_finalize.h).
//   * ReduceThenDestroy: 4 forked ranks over the network transport
//     (NCCL_SHM_DISABLE=1) each send 1 MiB to root 0 with ncclReduce as their
//     last call, destroy and exit; 50 runs, every one must succeed with the
//     exact sum at the root. Over the socket backend, and over UCX when built.
//   * CommChurn: 200 communicators created (a fresh unique id each),
//     used for a 1 MiB AllReduce and destroyed, back to back, over sockets.
// Under AddressSanitizer (CI's second run of every test) the repetitions are
// 10 runs and 50 communicators: the sanitizers check each teardown's memory
// use, and the uninstrumented run before it makes the full counts.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "common/sanitizers.h"
#include "nccl.h"

namespace chorus::test {
namespace {

constexpr size_t kCount = 1 << 18;  // 1 MiB of floats
constexpr int kRaceRuns = kUnderAddressSanitizer ? 10 : 50;
constexpr int kChurnComms = kUnderAddressSanitizer ? 50 : 200;

std::vector<std::pair<std::string, std::string>> netEnv(const char* backend) {
  return {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", backend}, {"NCCL_SOCKET_IFNAME", "lo"}};
}

// Element i of rank r's contribution; the root checks the sum over ranks.
float contribution(int rank, size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 5)); }

bool rootHasSum(RankCtx& ctx, const std::vector<float>& recv) {
  for (size_t i = 0; i < kCount; ++i) {
    float want = 0;
    for (int r = 0; r < ctx.nranks; ++r) want += contribution(r, i);
    if (recv[i] != want) {
      ctx.fail("root: element %zu is %g, expected %g", i, recv[i], want);
      return false;
    }
  }
  return true;
}

void reduceThenDestroy(const char* backend, int runs) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = netEnv(backend);
  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1) + " of " + std::to_string(runs));
    runProcesses(
        4,
        [&](RankCtx& ctx) {
          ncclComm_t comm = nullptr;
          if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
          std::vector<float> send(kCount), recv(kCount, -1.0f);
          for (size_t i = 0; i < kCount; ++i) send[i] = contribution(ctx.rank, i);
          if (!RANK_OK(ctx, ncclReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, 0, comm, nullptr)))
            return;
          if (ctx.rank == 0) rootHasSum(ctx, recv);
          RANK_OK(ctx, ncclCommDestroy(comm));
          // The process exits right here (the runner's _exit).
        },
        opts);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(TeardownRace, ReduceThenDestroySocketRepeated) { reduceThenDestroy("Socket", kRaceRuns); }

TEST(TeardownRace, ReduceThenDestroyUcxRepeated) {
#ifdef CHORUS_HAVE_UCX
  useHostMode();
  reduceThenDestroy("UCX", kRaceRuns);
#else
  GTEST_SKIP() << "the UCX backend is not built";
#endif
}

TEST(TeardownRace, CommChurnSocket) {
  RunOptions opts;
  opts.timeoutMs = 280000;
  opts.env = netEnv("Socket");
  runProcesses(
      4,
      [&](RankCtx& ctx) {
        std::vector<float> buf(kCount);
        for (int c = 0; c < kChurnComms; ++c) {
          ncclUniqueId id{};
          if (ctx.rank == 0 && !RANK_OK(ctx, ncclGetUniqueId(&id))) return;
          if (!RANK_OK(ctx, ncclBroadcast(&id, &id, sizeof(id), ncclChar, 0, ctx.comm, nullptr))) return;
          ncclComm_t comm = nullptr;
          if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, id, ctx.rank))) return;
          for (size_t i = 0; i < kCount; ++i) buf[i] = contribution(ctx.rank, i);
          const bool ok =
              RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
          const bool destroyed = RANK_OK(ctx, ncclCommDestroy(comm));
          if (!ok || !destroyed) {
            ctx.fail("rank %d: communicator %d of %d failed", ctx.rank, c + 1, kChurnComms);
            return;
          }
          for (size_t i = 0; i < kCount; i += 997) {
            float want = 0;
            for (int r = 0; r < ctx.nranks; ++r) want += contribution(r, i);
            if (buf[i] != want) {
              ctx.fail("rank %d: communicator %d: element %zu is %g, expected %g", ctx.rank, c + 1, i, buf[i], want);
              return;
            }
          }
        }
      },
      opts);
}

}  // namespace
}  // namespace chorus::test
