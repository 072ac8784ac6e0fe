// A full shm directory fails connection setup cleanly: in a private mount
// namespace a 64 KiB tmpfs stands in for /dev/shm (CHORUS_SHM_DIR), two
// processes try an AllReduce over shm. Every rank returns an error (no
// crash, no SIGBUS), the one that could not reserve its segment returns
// ncclSystemError saying the directory is full and how big the segment was,
// and no file is left behind. Needs root (mount namespaces); skipped
// otherwise.
#include <dirent.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/rank_runner.h"

namespace chorus::test {
namespace {

constexpr int kSkip = 77;

bool emptyDir(const std::string& path) {
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return false;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n == 0;
}

// In the forked child: a private mount namespace with a tiny tmpfs at `dir`.
bool mountTinyTmpfs(const std::string& dir) {
  if (unshare(CLONE_NEWNS) != 0) return false;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  return mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") == 0;
}

// The child's whole run; returns its exit code (0: as expected).
int runInTinyShm(const std::string& dir) {
  if (!mountTinyTmpfs(dir)) {
    std::printf("cannot make a private tmpfs: %m\n");
    return kSkip;
  }
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 30000;
  opts.env = {{"CHORUS_SHM_DIR", dir}, {"NCCL_SHM_DISABLE", "0"}, {"CHORUS_TIMEOUT_MS", "10000"}};
  auto outcomes = runProcessesRaw(
      2,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        std::vector<float> buf(1 << 16, 1.0f);
        ncclResult_t res = ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank);
        if (res == ncclSuccess)
          res = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
        const std::string msg = ncclGetLastError(comm);
        if (comm != nullptr) ncclCommAbort(comm);
        if (res == ncclSuccess) ctx.fail("rank %d: succeeded in a 64 KiB shm directory", ctx.rank);
        const bool full =
            msg.find(dir + " is full") != std::string::npos && msg.find("KiB segment") != std::string::npos;
        if (full && res != ncclSystemError)
          ctx.fail("rank %d: %s for a full directory, expected ncclSystemError", ctx.rank, ncclGetErrorString(res));
        // Exit code 3: this rank saw the full directory (at least one must).
        _exit(ctx.failed() ? 1 : full ? 3 : 0);
      },
      opts);
  int sawFull = 0, bad = 0;
  for (const ProcessOutcome& o : outcomes) {
    if (o.exited && (o.exitCode == 0 || o.exitCode == 3)) {
      sawFull += o.exitCode == 3;
      continue;
    }
    std::printf("%s\n", o.describe().c_str());
    ++bad;
  }
  if (sawFull == 0) std::printf("no rank reported the full directory\n");
  if (!emptyDir(dir)) std::printf("files were left in %s\n", dir.c_str());
  return bad == 0 && sawFull > 0 && emptyDir(dir) ? 0 : 1;
}

TEST(ShmFull, FailsCleanlyNamingTheSegmentSize) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a private mount namespace";
  char tmpl[] = "/tmp/chorus-shm-full.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) _exit(runInTinyShm(dir));
  int status = 0;
  waitpid(child, &status, 0);
  rmdir(dir.c_str());  // the tmpfs lived only in the child's namespace
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == kSkip) GTEST_SKIP() << "no private mount namespace here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's output above";
}

}  // namespace
}  // namespace chorus::test
