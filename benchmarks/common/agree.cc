#include "common/agree.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace chorus_bench {
namespace {

constexpr size_t kLineBytes = kRankLineBytes;

// Launches one collective per rank of the thread, grouped when there are several.
template <class Fn>
void forAllRanks(ThreadRanks& t, Fn&& launch) {
  const bool group = t.ranks.size() > 1;
  if (group) BENCH_NCCL(ncclGroupStart(), nullptr);
  for (auto& r : t.ranks) launch(*r);
  if (group) BENCH_NCCL(ncclGroupEnd(), t.ranks[0].get());
  waitReady(t);
  for (auto& r : t.ranks) BENCH_NCCL(r->mem.sync(), r.get());
}

}  // namespace

std::vector<double> agree(ThreadRanks& t, const std::vector<std::vector<double>>& perRank, ncclRedOp_t op) {
  const size_t n = perRank.empty() ? 0 : perRank[0].size();
  const size_t bytes = n * sizeof(double);
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    Rank& r = *t.ranks[i];
    void* view = r.mem.beginView(r.scratch, bytes, false);
    std::memcpy(view, perRank[i].data(), bytes);
    r.mem.endView(r.scratch, view, bytes, true);
  }
  forAllRanks(t, [&](Rank& r) {
    BENCH_NCCL(ncclAllReduce(r.scratch, r.scratch, n, ncclFloat64, op, r.comm, r.mem.stream()), &r);
  });
  std::vector<double> out(n);
  Rank& first = *t.ranks[0];
  void* view = first.mem.beginView(first.scratch, bytes, true);
  std::memcpy(out.data(), view, bytes);
  first.mem.endView(first.scratch, view, bytes, false);
  return out;
}

std::vector<std::string> gatherRankLines(ThreadRanks& t) {
  const Job& job = *t.job;
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  std::vector<void*> gathered(t.ranks.size());
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    Rank& r = *t.ranks[i];
    gathered[i] = r.lines;
    void* mine = static_cast<char*>(gathered[i]) + kLineBytes * r.rank;
    char* view = static_cast<char*>(r.mem.beginView(mine, kLineBytes, false));
    std::memset(view, 0, kLineBytes);
    std::snprintf(view, kLineBytes, "#  Rank %3d Process %3d Thread %3d Pid %7d on %12s %s", r.rank, job.world.rank,
                  t.thread, static_cast<int>(getpid()), host, r.mem.describe());
    r.mem.endView(mine, view, kLineBytes, true);
  }
  size_t i = 0;
  forAllRanks(t, [&](Rank& r) {
    void* buf = gathered[i++];
    const void* mine = static_cast<char*>(buf) + kLineBytes * r.rank;
    BENCH_NCCL(ncclAllGather(mine, buf, kLineBytes, ncclInt8, r.comm, r.mem.stream()), &r);
  });
  std::vector<std::string> lines;
  Rank& first = *t.ranks[0];
  const size_t total = kLineBytes * job.nranks;
  const char* view = static_cast<const char*>(first.mem.beginView(gathered[0], total, true));
  for (int r = 0; r < job.nranks; ++r)
    lines.emplace_back(view + kLineBytes * r, strnlen(view + kLineBytes * r, kLineBytes));
  first.mem.endView(gathered[0], const_cast<char*>(view), total, false);
  return lines;
}

}  // namespace chorus_bench
