// Communicators made from communicators, and non-blocking creation:
//   * ncclCommSplit: ranks with the same color form a child ordered by key
//     (ties by parent rank); NCCL_SPLIT_NOCOLOR gets NULL. Collectives then
//     run on the children.
//   * ncclCommShrink: the survivors of an exclude list form a child, in
//     parent order; excluded ranks do not call.
//   * config.blocking = 0: init returns ncclInProgress and completes in the
//     background; ncclCommGetAsyncError turns ncclSuccess when it is usable.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

// A quick correctness check of a (child) communicator: a few collectives.
void exerciseComm(RankCtx& ctx, ncclComm_t comm) {
  int n = 0;
  if (!RANK_OK(ctx, ncclCommCount(comm, &n))) return;
  const Coll colls[] = {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::ReduceScatter, Coll::SendRecvRing};
  int k = 0;
  for (Coll coll : colls) {
    Case c;
    c.coll = coll;
    c.type = k % 2 ? ncclBfloat16 : ncclInt32;
    c.op = OpKind::Sum;
    c.count = 1001 + static_cast<size_t>(k);
    c.root = k % n;
    ++k;
    if (!runCase(ctx, comm, c)) return;
  }
}

// Waits for a non-blocking communicator to leave ncclInProgress.
ncclResult_t waitReady(ncclComm_t comm, int timeoutMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    ncclResult_t res = ncclCommGetAsyncError(comm, &state);
    if (res != ncclSuccess) return res;
    if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

void checkRankCount(RankCtx& ctx, ncclComm_t comm, int wantRank, int wantCount, const char* what) {
  int rank = -1, count = -1;
  RANK_OK(ctx, ncclCommUserRank(comm, &rank));
  RANK_OK(ctx, ncclCommCount(comm, &count));
  if (rank != wantRank || count != wantCount)
    ctx.fail("rank %d: %s child is rank %d of %d, expected %d of %d", ctx.rank, what, rank, count, wantRank, wantCount);
}

// Color = rank % 3 (the last rank opts out); key = -rank reverses the order.
void splitBody(RankCtx& ctx) {
  const int n = ctx.nranks;
  const bool out = n > 2 && ctx.rank == n - 1;
  const int color = out ? NCCL_SPLIT_NOCOLOR : ctx.rank % 3;
  ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);  // must be overwritten, also with NULL
  if (!RANK_OK(ctx, ncclCommSplit(ctx.comm, color, -ctx.rank, &child, nullptr))) return;
  if (out) {
    if (child != nullptr) ctx.fail("rank %d: NCCL_SPLIT_NOCOLOR must give a NULL communicator", ctx.rank);
    exerciseComm(ctx, ctx.comm);  // the parent's collectives need every rank
    return;
  }
  // Members of my color, in descending parent rank (key = -rank).
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r)
    if (r % 3 == color && !(n > 2 && r == n - 1)) members.push_back(r);
  int want = 0;
  while (members[static_cast<size_t>(want)] != ctx.rank) ++want;
  checkRankCount(ctx, child, want, static_cast<int>(members.size()), "split");
  exerciseComm(ctx, child);
  // The parent still works next to its child.
  exerciseComm(ctx, ctx.comm);
  RANK_OK(ctx, ncclCommDestroy(child));
}

TEST(CommSplit, ColorKeyAndNoColorThreads) {
  for (int n : {1, 2, 5, 7}) runThreads(n, splitBody);
}

TEST(CommSplit, ColorKeyAndNoColorProcesses) { runProcesses(4, splitBody); }

TEST(CommSplit, SplitOfASplit) {
  runThreads(6, [](RankCtx& ctx) {
    ncclComm_t half = nullptr, quarter = nullptr;
    if (!RANK_OK(ctx, ncclCommSplit(ctx.comm, ctx.rank / 3, ctx.rank, &half, nullptr))) return;
    int hr = 0;
    RANK_OK(ctx, ncclCommUserRank(half, &hr));
    if (RANK_OK(ctx, ncclCommSplit(half, hr % 2, hr, &quarter, nullptr))) {
      exerciseComm(ctx, quarter);
      RANK_OK(ctx, ncclCommDestroy(quarter));
    }
    exerciseComm(ctx, half);
    RANK_OK(ctx, ncclCommDestroy(half));
  });
}

// One thread drives every rank (ncclCommInitAll, as a process with one GPU
// per rank does) and splits them all in one group: each split's membership
// exchange needs every rank of the parent, so it must wait for the group's
// end, not block the first call. Run in a child process that is killed and
// reported if it hangs.
void splitAllInOneGroup(RankCtx& ctx) {
  constexpr int n = 4;
  std::vector<ncclComm_t> comms(n, nullptr), kids(n, nullptr);
  if (!RANK_OK(ctx, ncclCommInitAll(comms.data(), n, nullptr))) return;
  RANK_OK(ctx, ncclGroupStart());
  for (int i = 0; i < n; ++i) RANK_OK(ctx, ncclCommSplit(comms[i], i % 2, -i, &kids[i], nullptr));
  if (!RANK_OK(ctx, ncclGroupEnd())) return;
  for (int i = 0; i < n; ++i) {
    if (kids[i] == nullptr) return ctx.fail("rank %d: no child after the group", i);
    // Key -rank: the higher parent rank comes first in each color.
    checkRankCount(ctx, kids[i], i < 2 ? 1 : 0, 2, "split");
  }
  // The children work: an all-reduce of each rank's parent rank, as one group.
  std::vector<float> values(n);
  for (int i = 0; i < n; ++i) values[i] = float(i);
  RANK_OK(ctx, ncclGroupStart());
  for (int i = 0; i < n; ++i)
    RANK_OK(ctx, ncclAllReduce(&values[i], &values[i], 1, ncclFloat32, ncclSum, kids[i], nullptr));
  if (!RANK_OK(ctx, ncclGroupEnd())) return;
  for (int i = 0; i < n; ++i)
    if (values[i] != (i % 2 ? 4.0f : 2.0f)) ctx.fail("rank %d: child all-reduce gave %g", i, double(values[i]));
  for (int i = 0; i < n; ++i) RANK_OK(ctx, ncclCommDestroy(kids[i]));
  for (int i = 0; i < n; ++i) RANK_OK(ctx, ncclCommDestroy(comms[i]));
}

TEST(CommSplit, OneThreadSplitsAllItsRanksInOneGroup) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 30000;
  runProcesses(1, splitAllInOneGroup, opts);
}

// Ranks in `excluded` skip the call; the rest build the child.
void shrinkBody(RankCtx& ctx, const std::vector<int>& excluded) {
  for (int e : excluded)
    if (e == ctx.rank) return;
  std::vector<int> list = excluded;
  ncclComm_t child = nullptr;
  if (!RANK_OK(ctx, ncclCommShrink(ctx.comm, list.data(), static_cast<int>(list.size()), &child, nullptr,
                                   NCCL_SHRINK_DEFAULT)))
    return;
  int want = 0;
  for (int r = 0; r < ctx.rank; ++r) {
    bool gone = false;
    for (int e : excluded) gone |= e == r;
    want += !gone;
  }
  checkRankCount(ctx, child, want, ctx.nranks - static_cast<int>(excluded.size()), "shrink");
  exerciseComm(ctx, child);
  RANK_OK(ctx, ncclCommDestroy(child));
}

TEST(CommShrink, ExcludeRanksThenCollectivesThreads) {
  runThreads(5, [](RankCtx& ctx) { shrinkBody(ctx, {1, 3}); });
  runThreads(4, [](RankCtx& ctx) { shrinkBody(ctx, {0}); });
  runThreads(3, [](RankCtx& ctx) { shrinkBody(ctx, {}); });
}

TEST(CommShrink, ExcludeRanksThenCollectivesProcesses) {
  runProcesses(4, [](RankCtx& ctx) { shrinkBody(ctx, {2}); });
}

TEST(CommNonBlocking, InitReturnsInProgressThenBecomesReady) {
  RunOptions opts;
  opts.initComms = false;
  runThreads(
      3,
      [](RankCtx& ctx) {
        // Stagger arrival so that no rank can finish inside the call.
        std::this_thread::sleep_for(std::chrono::milliseconds(20 * ctx.rank));
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t res = ncclCommInitRankConfig(&comm, ctx.nranks, ctx.id, ctx.rank, &config);
        if (!ctx.expectResult(res, ncclInProgress, "non-blocking ncclCommInitRankConfig")) {
          if (res != ncclSuccess) return;
        }
        if (comm == nullptr) {
          ctx.fail("rank %d: non-blocking init returned no communicator handle", ctx.rank);
          return;
        }
        if (!ctx.expectResult(waitReady(comm, 20000), ncclSuccess, "polling ncclCommGetAsyncError")) return;
        // Collectives on a non-blocking communicator may also return ncclInProgress.
        Case c;
        c.coll = Coll::AllReduce;
        c.type = ncclFloat32;
        c.count = 1001;
        PreparedCase p(ctx, comm, c);
        if (p.prepare()) {
          ncclResult_t r = p.issue();
          if (r == ncclInProgress) r = waitReady(comm, 20000);
          if (ctx.expectResult(r, ncclSuccess, "AllReduce on a non-blocking communicator")) p.verify();
        }
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

// A non-blocking init whose peer never comes stays in progress: queries and
// calls on it meanwhile get ncclInvalidArgument, as NCCL answers a call on
// a communicator whose last operation has not returned ncclSuccess, and
// ncclCommAbort still ends it at once.
TEST(CommNonBlocking, CallsDuringInitGetInvalidArgument) {
  useHostMode();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInProgress);
  ASSERT_NE(comm, nullptr);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("still initializing"), std::string::npos);
  float x = 1.0f;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(CommNonBlocking, SplitReturnsInProgressThenBecomesReady) {
  runThreads(4, [](RankCtx& ctx) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    ncclResult_t res = ncclCommSplit(ctx.comm, ctx.rank % 2, ctx.rank, &child, &config);
    if (res != ncclSuccess && res != ncclInProgress) {
      ctx.fail("rank %d: non-blocking split returned %s: %s", ctx.rank, ncclGetErrorString(res),
               ncclGetLastError(nullptr));
      return;
    }
    if (!ctx.expectResult(waitReady(child, 20000), ncclSuccess, "polling the split child")) return;
    checkRankCount(ctx, child, ctx.rank / 2, 2, "non-blocking split");
    exerciseComm(ctx, child);
    RANK_OK(ctx, ncclCommDestroy(child));
  });
}

// Under NCCL_COMM_ID, rank 0's process serves the bootstrap store. Its
// process exits right after ncclCommDestroy, as a real program would; the
// other ranks, possibly still collecting the finalize barrier's answer, must
// not lose the store. Two orders: rank 0 arrives at the barrier first (the
// others' final store requests race with its exit) or last.
void commIdFinalize(bool servingRankFirst) {
  const int port = freeLocalPort();
  ASSERT_GT(port, 0);
  ScopedEnv env({{"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port)}});
  RunOptions opts;
  opts.initComms = false;
  opts.env = {{"CHORUS_TIMEOUT_MS", "5000"}};
  runProcesses(
      3,
      [servingRankFirst](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        exerciseComm(ctx, comm);
        if ((ctx.rank == 0) != servingRankFirst) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        RANK_OK(ctx, ncclCommFinalize(comm));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

TEST(CommIdMode, ServingRankFinalizesFirst) { commIdFinalize(true); }
TEST(CommIdMode, ServingRankFinalizesLast) { commIdFinalize(false); }

TEST(CommInitAll, RanksAndCollectives) {
  runInitAll(4, [](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    chorusMode_t mode = chorusModeAuto;
    for (int r = 0; r < 4; ++r) {
      checkRankCount(ctx, comms[static_cast<size_t>(r)], r, 4, "InitAll");
      RANK_OK(ctx, chorusCommGetMode(comms[static_cast<size_t>(r)], &mode));
      if (mode != chorusModeHost) ctx.fail("InitAll comm %d is not in host mode", r);
    }
  });
}

}  // namespace
}  // namespace chorus::test
