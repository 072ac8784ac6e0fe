#include "core/comm_finalize.h"

#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/comm_lifecycle.h"
#include "core/exception_guard.h"
#include "core/peer_watch.h"
#include "core/result.h"
#include "gpu/gpu_runtime.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

// Ranks of one communicator (by hash) of this process that reached destroy.
struct LocalArrivals {
  std::mutex mu;
  std::map<uint64_t, int> byComm;
};

LocalArrivals& localArrivals() {
  static auto* arrivals = new LocalArrivals;  // never destroyed: used until exit
  return *arrivals;
}

int ranksInThisProcess(const ncclComm* comm) {
  const PeerInfo& self = comm->conns->peer(comm->id.rank);
  int n = 0;
  for (const PeerInfo& p : comm->conns->peers())
    if (p.processToken == self.processToken) ++n;
  return n;
}

// True for the last rank of the communicator in this process to get here.
bool lastLocalArrival(const ncclComm* comm) {
  const int local = ranksInThisProcess(comm);
  if (local <= 1) return true;
  LocalArrivals& a = localArrivals();
  std::lock_guard<std::mutex> lock(a.mu);
  int& arrived = a.byComm[comm->id.commHash];
  if (++arrived < local) return false;
  a.byComm.erase(comm->id.commHash);
  return true;
}

ncclResult_t finalizeNow(ncclComm* comm, bool wait) {
  std::lock_guard<std::mutex> lock(comm->opMutex);
  // Host mode has nothing in flight once a call returns; GPU mode first waits
  // for the kernels it launched.
  if (ncclResult_t drained = gpu::commDrain(comm); drained != ncclSuccess) {
    commSetError(comm, drained, lastErrorMessage());
    return drained;
  }
  const WaitBound bound = waitBoundLimit(comm->config.timeoutMs, &comm->abortFlag);
  ncclResult_t res =
      comm->bootstrap->finalizeBarrier(bound, wait, [comm](std::string* why) { return commPeerGone(comm, why); });
  if (res != ncclSuccess) {
    commSetError(comm, res, lastErrorMessage());
    return res;
  }
  comm->finalized = true;
  return ncclSuccess;
}

}  // namespace

// Finalize synchronizes with the other ranks, so inside a group it runs at
// ncclGroupEnd (concurrently with the other communicators' finalizes, which
// one thread may be driving), and on a non-blocking communicator it runs in
// the background and is polled through ncclCommGetAsyncError.
ncclResult_t commFinalize(ncclComm* comm, const DeferRendezvous& defer) {
  if (comm->finalized) return fail(ncclInvalidUsage, "ncclCommFinalize: communicator already finalized");
  if (comm->revoked) return fail(ncclInvalidUsage, "ncclCommFinalize: communicator was revoked");
  if (defer) return defer(comm, /*finalize=*/true, [comm] { return finalizeNow(comm, true); });
  if (comm->config.blocking == 0) {
    if (comm->initThread.joinable()) comm->initThread.join();
    comm->asyncError = ncclInProgress;
    comm->initThread = std::thread([comm] {
      ncclResult_t res = guardedCall("ncclCommFinalize thread", [comm] { return finalizeNow(comm, true); });
      comm->asyncError = res;
    });
    return ncclInProgress;
  }
  return finalizeNow(comm, true);
}

ncclResult_t commFinalizeForDestroy(ncclComm* comm) {
  if (comm->finalized || comm->revoked.load() || !comm->bootstrap || !comm->conns) return ncclSuccess;
  if (comm->asyncError.load() != ncclSuccess) return ncclSuccess;
  return finalizeNow(comm, lastLocalArrival(comm));
}

}  // namespace chorus
