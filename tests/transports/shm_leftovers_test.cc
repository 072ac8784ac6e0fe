// Segments that processes which died during connection setup left in the
// shm directory are removed by the next process that sets up shm
// (transports/shm/shm_leftovers.h):
//   * ShmLeftovers.OnlyDeadOwnersOfOursAreRemoved: in a scratch directory,
//     a segment of a dead pid goes; those of a live pid, of this process, of
//     another pid namespace, and files that are not segments stay.
//   * ShmLeftovers.NextJobRemovesThem: with CHORUS_SHM_DIR at a scratch
//     directory holding a dead pid's segment and a live one's, two processes
//     run an AllReduce over shm: the dead one's file is gone, the live one's
//     kept, and the job left nothing of its own.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "transports/shm/shm_leftovers.h"

namespace chorus::test {
namespace {

// A pid that existed a moment ago and no longer does.
pid_t deadPid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

// The name a segment of process `pid` (in our pid namespace) would have.
std::string segmentOf(pid_t pid, const char* rest) {
  std::string prefix = shmSegmentPrefix();  // chorus-<our pid>-p<ns>-
  const size_t ns = prefix.find("-p");
  return "chorus-" + std::to_string(pid) + prefix.substr(ns) + rest;
}

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/chorus-shm-test.XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "";
  }
  ~ScratchDir() {
    for (const std::string& f : files()) unlink((path_ + "/" + f).c_str());
    rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  void touch(const std::string& name) const { std::ofstream(path_ + "/" + name) << "x"; }
  std::set<std::string> files() const {
    std::set<std::string> out;
    if (DIR* d = opendir(path_.c_str())) {
      while (const dirent* e = readdir(d))
        if (e->d_name[0] != '.') out.insert(e->d_name);
      closedir(d);
    }
    return out;
  }

 private:
  std::string path_;
};

TEST(ShmLeftovers, OnlyDeadOwnersOfOursAreRemoved) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string dead = segmentOf(deadPid(), "1-0-0");
  const std::string live = segmentOf(getppid(), "1-0-0");
  const std::string mine = segmentOf(getpid(), "1-0-0");
  const std::string otherNs = "chorus-" + std::to_string(deadPid()) + "-p1-1-0-0";
  const std::string oldStyle = "chorus-" + std::to_string(deadPid()) + "-1-0-0";
  const std::string stranger = "chorus-notapid-p1-x";
  for (const std::string& f : {dead, live, mine, otherNs, oldStyle, stranger}) dir.touch(f);
  EXPECT_EQ(removeLeftoverSegments(dir.path()), 1);
  const std::set<std::string> want = {live, mine, otherNs, oldStyle, stranger};
  EXPECT_EQ(dir.files(), want);
  EXPECT_EQ(removeLeftoverSegments(dir.path()), 0);
}

TEST(ShmLeftovers, NextJobRemovesThem) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string dead = segmentOf(deadPid(), "1-0-7");
  const std::string live = segmentOf(getpid(), "1-0-7");  // this test process: alive throughout
  dir.touch(dead);
  dir.touch(live);
  RunOptions opts;
  opts.env = {{"CHORUS_SHM_DIR", dir.path()}, {"NCCL_SHM_DISABLE", "0"}};
  runProcesses(
      2,
      [](RankCtx& ctx) {
        std::vector<float> buf(1024, 1.0f);
        if (!RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, ctx.comm, nullptr)))
          return;
        if (buf[0] != 2.0f) ctx.fail("rank %d: sum %g, expected 2", ctx.rank, buf[0]);
      },
      opts);
  const std::set<std::string> want = {live};
  EXPECT_EQ(dir.files(), want);
}

}  // namespace
}  // namespace chorus::test
