// The bootstrap after init (docs/reliability.md, "Bootstrap after init"):
//   * the process that created the unique id may exit once every rank's init
//     returned: collectives, a new lazy connection, a split and a shrink
//     still work (they go rank to rank);
//   * a rank claimed twice, or ranks disagreeing on nranks, fail init on
//     every rank with one message naming the conflict;
//   * splitting many times leaves nothing behind in the mailboxes.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/mesh.h"
#include "bootstrap/unique_id.h"
#include "common/coll_cases.h"
#include "common/rank_runner.h"
#include "core/result.h"

namespace chorus::test {
namespace {

int64_t msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

bool allReduceWorks(RankCtx& ctx, ncclComm_t comm) {
  Case c;
  c.coll = Coll::AllReduce;
  c.type = ncclInt32;
  c.count = 1001;
  return runCase(ctx, comm, c);
}

// Until nothing accepts connections at the id's address any more (bounded).
bool waitUntilStoreGone(const ncclUniqueId& id, int timeoutMs) {
  UniqueIdInfo info;
  if (decodeUniqueId(id, &info) != ncclSuccess) return false;
  const auto t0 = std::chrono::steady_clock::now();
  while (msSince(t0) < timeoutMs) {
    int fd = socket(info.addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool up = connect(fd, info.addr.sa(), info.addr.len) == 0;
    close(fd);
    if (!up) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Rank 0 sends to rank 2 (not ring neighbours: a connection no collective made).
bool newPeerConnectionWorks(RankCtx& ctx, ncclComm_t comm) {
  if (ctx.rank != 0 && ctx.rank != 2) return true;
  std::vector<int> buf(257, ctx.rank == 0 ? 4242 : 0);
  ncclResult_t res = ctx.rank == 0 ? ncclSend(buf.data(), buf.size(), ncclInt32, 2, comm, nullptr)
                                   : ncclRecv(buf.data(), buf.size(), ncclInt32, 0, comm, nullptr);
  if (!RANK_OK(ctx, res)) return false;
  if (ctx.rank == 2 && buf[256] != 4242) ctx.fail("rank 2: received %d, expected 4242", buf[256]);
  return !ctx.failed();
}

// A process that only creates the id, and exits once every rank has told it
// (one byte on `done`) that its init returned.
pid_t startCreator(int nranks, ncclUniqueId* id, int* doneWrite) {
  int idPipe[2], done[2];
  if (pipe(idPipe) != 0 || pipe(done) != 0) return -1;
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(idPipe[0]);
    close(done[1]);
    ncclUniqueId mine;
    if (ncclGetUniqueId(&mine) != ncclSuccess) _exit(2);
    if (write(idPipe[1], &mine, sizeof(mine)) != static_cast<ssize_t>(sizeof(mine))) _exit(3);
    char b;
    for (int got = 0; got < nranks;) {
      const ssize_t r = read(done[0], &b, 1);
      if (r <= 0) _exit(4);  // every rank went away without saying so
      ++got;
    }
    _exit(0);
  }
  close(idPipe[1]);
  close(done[0]);
  const bool ok = read(idPipe[0], id, sizeof(*id)) == static_cast<ssize_t>(sizeof(*id));
  close(idPipe[0]);
  *doneWrite = done[1];
  return ok ? pid : -1;
}

TEST(BootstrapMesh, IdCreatorExitsAfterInit) {
  useHostMode();
  constexpr int kRanks = 4;
  ncclUniqueId id{};
  int doneWrite = -1;
  const pid_t creator = startCreator(kRanks, &id, &doneWrite);
  ASSERT_GT(creator, 0);
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  runProcesses(
      kRanks,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, kRanks, id, ctx.rank))) return;
        char b = 1;
        if (write(doneWrite, &b, 1) != 1) ctx.fail("rank %d: cannot tell the creator", ctx.rank);
        close(doneWrite);
        if (!waitUntilStoreGone(id, 20000)) {
          ctx.fail("rank %d: the id creator's store is still up", ctx.rank);
          return;
        }
        if (!allReduceWorks(ctx, comm) || !newPeerConnectionWorks(ctx, comm)) return;
        ncclComm_t half = nullptr;
        if (!RANK_OK(ctx, ncclCommSplit(comm, ctx.rank % 2, ctx.rank, &half, nullptr))) return;
        allReduceWorks(ctx, half);
        if (ctx.rank != kRanks - 1) {  // the last rank is left out of the shrink
          ncclComm_t small = nullptr;
          int exclude = kRanks - 1;
          if (RANK_OK(ctx, ncclCommShrink(comm, &exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT))) {
            allReduceWorks(ctx, small);
            RANK_OK(ctx, ncclCommDestroy(small));
          }
        }
        RANK_OK(ctx, ncclCommDestroy(half));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
  close(doneWrite);
  int status = 0;
  ASSERT_EQ(waitpid(creator, &status, 0), creator);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "creator status " << status;
}

// Three processes init with (rank, nranks) from `claims`; every one must fail
// with ncclInvalidUsage and a message containing each of `want`, promptly.
void expectInitConflict(const std::vector<std::pair<int, int>>& claims, const std::vector<std::string>& want) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 30000;
  // The id's store (in this process) shuts down once every client that had
  // joined has left; two processes that fail fast could take it down before
  // a slow third one connects, which would then learn only that the store
  // closed. Holding it open here gives every process the verdict.
  std::shared_ptr<Store> held;
  opts.withId = [&](const ncclUniqueId& id) {
    if (connectStore(id, 0, waitBoundAfter(5000), &held) != ncclSuccess) ADD_FAILURE() << lastErrorMessage();
  };
  runProcesses(
      static_cast<int>(claims.size()),
      [&](RankCtx& ctx) {
        const auto [rank, nranks] = claims[static_cast<size_t>(ctx.rank)];
        ncclComm_t comm = nullptr;
        const auto t0 = std::chrono::steady_clock::now();
        const ncclResult_t res = ncclCommInitRank(&comm, nranks, ctx.id, rank);
        const std::string msg = ncclGetLastError(nullptr);
        if (res == ncclSuccess) {
          ctx.fail("process %d (rank %d of %d): init succeeded", ctx.rank, rank, nranks);
          ncclCommDestroy(comm);
          return;
        }
        if (res != ncclInvalidUsage)
          ctx.fail("process %d: init returned %s: %s", ctx.rank, ncclGetErrorString(res), msg.c_str());
        for (const std::string& w : want)
          if (msg.find(w) == std::string::npos)
            ctx.fail("process %d: message lacks '%s': %s", ctx.rank, w.c_str(), msg.c_str());
        if (msSince(t0) > 10000) ctx.fail("process %d: failing took %lld ms", ctx.rank, (long long)msSince(t0));
      },
      opts);
}

TEST(BootstrapMesh, DuplicateRanksFailInitEverywhere) {
  expectInitConflict({{0, 3}, {0, 3}, {1, 3}}, {"rank 0 is claimed by two processes: pid ", " and pid "});
}

TEST(BootstrapMesh, InconsistentNranksFailInitEverywhere) {
  expectInitConflict({{0, 3}, {1, 3}, {2, 4}}, {"says nranks=4", "says nranks=3"});
}

// Splits `times` times; the keys held by this process's mailbox after the
// tenth split and after the last must be the same (give or take a message
// in flight).
void splitManyTimes(RankCtx& ctx, int times) {
  UniqueIdInfo info;
  if (decodeUniqueId(ctx.id, &info) != ncclSuccess) return ctx.fail("bad id");
  size_t early = 0;
  for (int i = 0; i < times; ++i) {
    ncclComm_t child = nullptr;
    if (!RANK_OK(ctx, ncclCommSplit(ctx.comm, 0, ctx.rank, &child, nullptr))) return;
    if (!RANK_OK(ctx, ncclCommDestroy(child))) return;
    if (i == 9) early = meshHeldKeys(info.secret);
  }
  const size_t late = meshHeldKeys(info.secret);
  if (late > early + 4)
    ctx.fail("rank %d: the mailbox held %zu keys after 10 splits and %zu after %d", ctx.rank, early, late, times);
}

TEST(BootstrapMesh, SplittingManyTimesKeepsMailboxesFlatThreads) {
  runThreads(2, [](RankCtx& ctx) { splitManyTimes(ctx, 200); });
}

TEST(BootstrapMesh, SplittingManyTimesKeepsMailboxesFlatProcesses) {
  runProcesses(3, [](RankCtx& ctx) { splitManyTimes(ctx, 60); });
}

}  // namespace
}  // namespace chorus::test
