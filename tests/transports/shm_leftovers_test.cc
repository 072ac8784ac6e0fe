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
//   * ShmLeftovers.HandleThatNamesNoSegmentOfThePeerIsRefused: the sender
//     opens and then unlinks the path a receiver sent; a path that is not
//     one of that receiver's segments (another file, another pid's segment,
//     an embedded NUL) fails with ncclInternalError, a symlink with a
//     segment's name fails to open, and every file is still there.
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
#include "transports/shm/shm_transport.h"

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

TEST(ShmLeftovers, HandleThatNamesNoSegmentOfThePeerIsRefused) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const pid_t peerPid = getppid();
  const std::string victim = "notes.txt";
  const std::string othersSegment = segmentOf(deadPid(), "0-1-0");
  const std::string link = segmentOf(peerPid, "0-1-9");
  // Large enough to pass the size check an unchecked path would get to.
  std::ofstream(dir.path() + "/" + victim) << std::string(1 << 20, 'x');
  std::ofstream(dir.path() + "/" + othersSegment) << std::string(1 << 20, 'x');
  ASSERT_EQ(symlink((dir.path() + "/" + victim).c_str(), (dir.path() + "/" + link).c_str()), 0);
  const std::string real = segmentOf(peerPid, "0-1-0");
  EXPECT_TRUE(isSegmentPathOf(dir.path() + "/" + real, peerPid));
  EXPECT_FALSE(isSegmentPathOf(real, peerPid)) << "a bare name without its directory";
  EXPECT_FALSE(isSegmentPathOf(dir.path() + "/" + real + "/..", peerPid));
  EXPECT_FALSE(isSegmentPathOf(dir.path() + "/chorus-0" + real.substr(7), peerPid)) << "a pid with a leading zero";
  ShmTransport shm;
  ConnRequest req;
  req.selfRank = 0;
  req.peerRank = 1;
  req.slotBytes = 4096;
  req.nslots = 4;
  req.label = "test 1->0";
  PeerInfo peer;
  peer.rank = 1;
  peer.pid = peerPid;
  const std::string withNul = dir.path() + "/" + real + std::string(1, '\0') + "/../" + victim;
  for (const std::string& path :
       {dir.path() + "/" + victim, dir.path() + "/" + othersSegment, dir.path() + "/" + link, withNul, std::string()}) {
    FifoEnd end;
    const ncclResult_t res = shm.connectSend(req, peer, std::vector<uint8_t>(path.begin(), path.end()), &end);
    // The symlink has a segment's name: opening it without following fails instead.
    EXPECT_EQ(res, path == dir.path() + "/" + link ? ncclSystemError : ncclInternalError)
        << path.size() << " bytes: " << path.c_str();
  }
  const std::set<std::string> left = {victim, othersSegment, link};
  EXPECT_EQ(dir.files(), left) << "nothing a refused handle named was removed";
}

}  // namespace
}  // namespace chorus::test
