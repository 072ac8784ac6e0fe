#include "core/comm.h"

#include <algorithm>

#include "bootstrap/bootstrap.h"
#include "core/comm_query.h"
#include "core/result.h"
#include "core/wire_residuals.h"
#include "gpu/gpu_runtime.h"
#include "plan/plan_cache.h"
#include "topo/comm_topology.h"
#include "transport/connection_table.h"

// The communicator is the composition root: its constructor and destructor
// are the one place that sees every part it owns.
ncclComm::ncclComm()
    : planCache(std::make_unique<chorus::PlanCache>()), wireResiduals(std::make_unique<chorus::WireResiduals>()) {}
ncclComm::~ncclComm() {
  if (bootstrap) bootstrap->unpublishStatus();  // its answers read `activity`, destroyed first
}

namespace chorus {

void commSetError(ncclComm* comm, ncclResult_t code, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (comm->errorMessage.empty()) comm->errorMessage = message;
  }
  int expected = ncclSuccess;
  comm->asyncError.compare_exchange_strong(expected, code);
}

ncclResult_t commCheckUsable(ncclComm* comm, const char* fn) {
  // A kernel's failure becomes the communicator's (not while init may still
  // be creating the GPU state, nor once abort may be tearing it down).
  if (comm->asyncError.load() != ncclInProgress && !comm->abortFlag.load() && comm->gpu) (void)gpu::commPollError(comm);
  int err = comm->asyncError.load();
  if (err == ncclInProgress)  // as NCCL: ncclInvalidArgument
    return fail(ncclInvalidArgument, "%s: communicator is still initializing (poll ncclCommGetAsyncError)", fn);
  if (comm->revoked.load()) return fail(ncclInvalidUsage, "%s: communicator was revoked", fn);
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, "%s: communicator was aborted", fn);
  if (comm->finalized) return fail(ncclInvalidUsage, "%s: communicator was finalized", fn);
  if (err != ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return fail(static_cast<ncclResult_t>(err), "%s: communicator has failed earlier: %s", fn,
                comm->errorMessage.c_str());
  }
  return ncclSuccess;
}

ncclResult_t commEndedByCaller(const ncclComm* comm) {
  if (comm->abortFlag.load(std::memory_order_relaxed))
    return fail(ncclInvalidUsage, "rank %d: operation ended by ncclCommAbort", comm->id.rank);
  if (comm->revoked.load(std::memory_order_relaxed))
    return fail(ncclInvalidUsage, "rank %d: operation ended by ncclCommRevoke", comm->id.rank);
  return ncclSuccess;
}

CommRegistry& CommRegistry::instance() {
  static CommRegistry registry;
  return registry;
}

void CommRegistry::add(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.push_back(comm);
}

void CommRegistry::remove(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.erase(std::remove(live_.begin(), live_.end(), comm), live_.end());
  removals_.fetch_add(1, std::memory_order_release);
}

void CommRegistry::forEach(const std::function<void(const ncclComm&)>& fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const ncclComm* c : live_) fn(*c);
}

namespace {

// The communicators this thread found live while the registry's removal
// count was `removals` (CommRegistry). Constant-initialized: no guard on the
// way to it. (Not in the static TLS block: a library that programs such as
// Python load with dlopen cannot count on room there.)
struct LiveCache {
  static constexpr unsigned kSize = 4;
  const ncclComm* comms[kSize] = {};
  uint64_t removals = ~uint64_t{0};
  unsigned next = 0;
};
thread_local constinit LiveCache tLive;

}  // namespace

bool CommRegistry::contains(const ncclComm* comm) {
  // Read before the lock: a removal after this read invalidates what the
  // lookup below caches, on this thread's next call.
  const uint64_t removals = removals_.load(std::memory_order_acquire);
  LiveCache& cache = tLive;
  if (cache.removals == removals) {
    for (const ncclComm* known : cache.comms)
      if (known == comm) return true;
  } else {
    cache = LiveCache{};
    cache.removals = removals;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (std::find(live_.begin(), live_.end(), comm) == live_.end()) return false;
  cache.comms[cache.next++ % LiveCache::kSize] = comm;
  return true;
}

ncclResult_t checkComm(const ncclComm* comm, const char* fn) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
  if (!CommRegistry::instance().contains(comm))
    return fail(ncclInvalidArgument, "%s: comm %p is not a live communicator (destroyed or never created)", fn,
                static_cast<const void*>(comm));
  return ncclSuccess;
}

int commRank(const ncclComm* comm) { return comm->id.rank; }
int commNRanks(const ncclComm* comm) { return comm->id.nranks; }
int commLocalNRanks(const ncclComm* comm) { return comm->id.localNRanks; }
int commLocalRank(const ncclComm* comm) { return comm->id.localRank; }
int commCudaDevice(const ncclComm* comm) { return comm->id.cudaDev; }
bool commIsHostMode(const ncclComm* comm) { return comm->id.hostMode; }

}  // namespace chorus
