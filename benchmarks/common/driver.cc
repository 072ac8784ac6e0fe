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

// Compressed wires take float, half and bfloat16 with sum or avg (docs/wire.md).
bool wireAccepts(const Options& o) {
  for (ncclDataType_t t : o.types)
    if (t != ncclFloat32 && t != ncclFloat16 && t != ncclBfloat16) return false;
  for (BenchOp op : o.ops)
    if (op != BenchOp::Sum && op != BenchOp::Avg) return false;
  return true;
}

bool validate(const Job& job) {
  if (job.spec->rooted && job.opts.root >= job.nranks) {
    std::fprintf(stderr, "%s: root %d is not a rank (%d ranks)\n", job.tool, job.opts.root, job.nranks);
    return false;
  }
  if (job.opts.reduceConfigured() && !job.spec->takesReduceConfig) {
    std::fprintf(stderr, "%s: --wire and --deterministic apply to all_reduce_perf and reduce_scatter_perf only\n",
                 job.tool);
    return false;
  }
  if (job.opts.wire != chorusWireNative && !wireAccepts(job.opts)) {
    std::fprintf(stderr, "%s: a compressed --wire takes -d float, half or bfloat16 and -o sum or avg\n", job.tool);
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
  job.reduceConfig.wire = job.opts.wire;
  job.reduceConfig.deterministic = job.opts.deterministic ? 1 : 0;
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
