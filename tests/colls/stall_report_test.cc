// Stall reports (docs/reliability.md, "Stall reports"), as processes over shm:
//   * SkippedOperation: rank 2 calls op #2 six seconds after the others with
//     CHORUS_STALL_WARN_S=2. The waiting ranks log a WARN line naming op #2,
//     its call, the waiting ranks and, from what rank 2's mailbox thread
//     answered while rank 2 slept, its last completed op (#1) and how long it
//     has been outside the library; they write the JSON status file; then
//     everyone succeeds.
//   * StatusOnSignal: reports off (CHORUS_STALL_WARN_S=0); a waiting rank
//     that gets SIGUSR1 writes the status file with its call in flight.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_runner.h"
#include "core/log.h"

namespace chorus::test {
namespace {

constexpr size_t kCount = 1 << 16;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string scratchDir(const char* name) {
  std::string dir = "/tmp/chorus-stall-" + std::string(name) + "-" + std::to_string(getpid());
  std::string cmd = "rm -rf " + dir + " && mkdir -p " + dir;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

void allReduce(RankCtx& ctx, ncclComm_t comm) {
  std::vector<float> buf(kCount, static_cast<float>(ctx.rank + 1));
  if (!RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr))) return;
  const float want = static_cast<float>(ctx.nranks * (ctx.nranks + 1) / 2);
  if (buf[kCount / 2] != want) ctx.fail("rank %d: got %g, expected %g", ctx.rank, buf[kCount / 2], want);
}

void expectContains(RankCtx& ctx, const std::string& text, const std::string& part, const char* where) {
  if (text.find(part) == std::string::npos)
    ctx.fail("rank %d: %s lacks \"%s\":\n%s", ctx.rank, where, part.c_str(), text.substr(0, 1500).c_str());
}

// Whether `log` holds `prefix` followed by a positive number of seconds ("4 s").
bool saysIdleFor(const std::string& log, const std::string& prefix) {
  for (size_t at = log.find(prefix); at != std::string::npos; at = log.find(prefix, at + 1)) {
    size_t p = at + prefix.size();
    const size_t digits = p;
    while (p < log.size() && log[p] >= '0' && log[p] <= '9') ++p;
    if (p > digits && log[digits] != '0' && log.compare(p, 2, " s") == 0) return true;
  }
  return false;
}

TEST(StallReport, SkippedOperationNamesTheRankAndTheOp) {
  const std::string dir = scratchDir("skip");
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"CHORUS_STALL_WARN_S", "2"},
              {"NCCL_DEBUG", "WARN"},
              {"NCCL_DEBUG_FILE", dir + "/log.%p"},
              {"CHORUS_STATUS_FILE", dir + "/status.%p.json"}};
  const int late = 2;
  runProcesses(
      3,
      [&](RankCtx& ctx) {
        logReset();  // take NCCL_DEBUG_FILE of this child
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        allReduce(ctx, comm);  // op #1
        if (ctx.rank == late) std::this_thread::sleep_for(std::chrono::seconds(6));
        allReduce(ctx, comm);  // op #2: the stall is reported, not an error
        RANK_OK(ctx, ncclCommDestroy(comm));
        const std::string pid = std::to_string(getpid());
        const std::string log = readFile(dir + "/log." + pid);
        if (ctx.rank == late) {
          if (log.find("no progress for") != std::string::npos)
            ctx.fail("rank %d was not waiting but reported a stall:\n%s", ctx.rank, log.c_str());
          return;
        }
        expectContains(ctx, log, "op #2 AllReduce(65536 x float, sum): ranks 0,1 waiting", "the log");
        if (!saysIdleFor(log, "rank 2 last completed op #1 and has not called since "))
          ctx.fail("rank %d: the log does not say what rank 2 last did:\n%s", ctx.rank, log.substr(0, 1500).c_str());
        const std::string status = readFile(dir + "/status." + pid + ".json");
        expectContains(ctx, status, "\"communicators\": [{", "the status file");
        expectContains(ctx, status, "\"opNumber\": 2", "the status file");
        expectContains(ctx, status, "\"noProgressForMs\"", "the status file");
      },
      opts);
}

TEST(StallReport, StatusOnSignal) {
  const std::string dir = scratchDir("signal");
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"CHORUS_STALL_WARN_S", "0"}, {"CHORUS_STATUS_FILE", dir + "/status.%p.json"}};
  runProcesses(
      2,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        allReduce(ctx, comm);
        const std::string path = dir + "/status." + std::to_string(getpid()) + ".json";
        std::thread poke;
        if (ctx.rank == 0)  // signals itself while it waits in op #2
          poke = std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(2500));
            kill(getpid(), SIGUSR1);
          });
        else
          std::this_thread::sleep_for(std::chrono::seconds(5));
        allReduce(ctx, comm);
        if (poke.joinable()) poke.join();
        RANK_OK(ctx, ncclCommDestroy(comm));
        const std::string status = readFile(path);
        if (ctx.rank == 1) {
          if (!status.empty()) ctx.fail("rank 1 wrote a status file without a signal or a stall");
          return;
        }
        expectContains(ctx, status, "\"call\": \"AllReduce(65536 x float, sum)\"", "the status file");
        expectContains(ctx, status, "\"waitsOn\": {\"peer\": 1", "the status file");
      },
      opts);
}

}  // namespace
}  // namespace chorus::test
