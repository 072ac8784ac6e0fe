// benchMain: parse the command line, find this process's place in the job,
// agree on a unique id, run one thread per -t, and turn the outcome into
// the exit code.
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/context.h"

namespace chorus_bench {

void checkNccl(ncclResult_t res, const char* what, const Rank* rank) {
  if (res == ncclSuccess || res == ncclInProgress) return;
  const char* detail = ncclGetLastError(rank ? rank->comm : nullptr);
  std::fprintf(stderr, "chorus benchmark: rank %d: %s failed: %s%s%s\n", rank ? rank->rank : -1, what,
               ncclGetErrorString(res), detail && *detail ? ": " : "", detail ? detail : "");
  worldAbort(3);
}

void waitReady(ThreadRanks& t) {
  if (t.job->opts.blockingInit) return;
  for (auto& r : t.ranks) {
    if (!r->comm) continue;
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      BENCH_NCCL(ncclCommGetAsyncError(r->comm, &state), r.get());
      if (state == ncclInProgress) std::this_thread::yield();
    }
    BENCH_NCCL(state, r.get());
  }
}

namespace {

const char* baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool validate(const Job& job) {
  if (job.spec->rooted && job.opts.root >= job.nranks) {
    std::fprintf(stderr, "%s: root %d is not a rank (%d ranks)\n", job.tool, job.opts.root, job.nranks);
    return false;
  }
  return true;
}

}  // namespace

int benchMain(int argc, char** argv, const CollSpec& spec) {
  Job job;
  job.spec = &spec;
  job.tool = baseName(argv[0]);
  if (!worldInit(&argc, &argv, &job.world)) return 2;
  bool done = false;
  const int code = parseOptions(argc, argv, job.tool, &job.opts, &done);
  if (done) {
    worldFinalize();
    return code;
  }
  job.nranks = job.world.size * job.opts.nThreads * job.opts.ranksPerThread;
  if (!validate(job)) worldAbort(2);
  const ncclResult_t idRes = worldUniqueId(job.world, &job.id);
  if (idRes != ncclSuccess) {
    std::fprintf(stderr, "%s: ncclGetUniqueId failed: %s: %s\n", job.tool, ncclGetErrorString(idRes),
                 ncclGetLastError(nullptr));
    worldAbort(3);
  }
  std::vector<std::thread> threads;
  for (int t = 1; t < job.opts.nThreads; ++t) threads.emplace_back(runThread, &job, t);
  runThread(&job, 0);
  for (std::thread& th : threads) th.join();
  worldFinalize();
  return job.exitCode.load();
}

}  // namespace chorus_bench
