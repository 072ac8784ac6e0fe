// State shared by the driver's pieces: the job (one per process), the ranks
// one thread drives, and what one row of the table is being measured with.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "common/coll.h"
#include "common/memory.h"
#include "common/options.h"
#include "common/world.h"

namespace chorus_bench {

// One per process, read-only once the threads start (except exitCode).
struct Job {
  const CollSpec* spec = nullptr;
  const char* tool = "";
  Options opts;
  chorusReduceConfig_t reduceConfig = CHORUS_REDUCE_CONFIG_INIT;  // from opts.wire and opts.deterministic
  ProcessWorld world;
  ncclUniqueId id{};
  int nranks = 0;  // processes x threads x ranks per thread
  std::atomic<int> exitCode{0};
  // Threads whose buffers are allocated. No thread launches a collective
  // before all have: in GPU mode an allocation may wait for the whole
  // device, and with it for a peer's kernel that waits for this thread.
  std::atomic<int> allocated{0};
};

// One communicator and its buffers.
struct Rank {
  int rank = 0;
  ncclComm_t comm = nullptr;
  Memory mem;
  void* send = nullptr;  // out-of-place input
  void* recv = nullptr;  // output; also both pointers of in-place runs
  size_t sendBytes = 0;
  size_t recvBytes = 0;
  void* scratch = nullptr;     // small buffer for agreeing on results
  void* lines = nullptr;       // nranks header lines (gatherRankLines)
  ncclRedOp_t op = ncclSum;    // operator of the current configuration
  void* sendHandle = nullptr;  // -R 1: registration handles
  void* recvHandle = nullptr;
};

// The ranks one thread drives, always launched together in one group.
struct ThreadRanks {
  Job* job = nullptr;
  int thread = 0;
  std::vector<std::unique_ptr<Rank>> ranks;
  bool printer() const { return !ranks.empty() && ranks[0]->rank == 0; }
};

// What one table row runs with.
struct RowConfig {
  ncclDataType_t type;
  BenchOp op;
  int root;
  Layout layout;
};

// Stops the job when an NCCL call fails, naming the call and the reason.
void checkNccl(ncclResult_t res, const char* what, const Rank* rank);
#define BENCH_NCCL(call, rank) ::chorus_bench::checkNccl((call), #call, (rank))

// Waits until no communicator of the thread reports ncclInProgress
// (non-blocking communicators only).
void waitReady(ThreadRanks& t);

// Per-thread body: communicators, buffers, the sweep, teardown.
void runThread(Job* job, int thread);

}  // namespace chorus_bench
