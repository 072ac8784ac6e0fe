// The communicator, composed of parts: identity (who am I), the bootstrap
// (how ranks talk before and outside data movement), the connection table
// (connectors to peers) and the execution state shared with the API (abort
// flag, asynchronous error, custom reduction operators).
//
// The communicator sits below the executors and transports that use it: it
// owns their per-communicator state (connection table, plan cache, GPU state)
// through pointers to types declared here only by name, so this header
// includes none of theirs. A file that touches such a member includes its
// header itself (docs/architecture.md, "Layers").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/comm_config.h"
#include "core/gpu_state_handle.h"
#include "core/op_activity.h"
#include "core/op_fingerprint.h"
#include "core/redop_table.h"
#include "core/registration.h"
#include "core/traffic_stats.h"
#include "nccl.h"

namespace chorus {
class Bootstrap;
class ConnectionTable;
class PlanCache;
class Store;
class WireResiduals;
}  // namespace chorus
namespace chorus::graph {
struct CommGraph;
}
namespace chorus::topo {
struct CommTopology;
}

namespace chorus {

inline constexpr uint64_t kCommMagic = 0x43686f7275734d31ull;  // "ChorusM1"

struct CommIdentity {
  int rank = -1;
  int nranks = 0;
  int localRank = 0;
  int localNRanks = 1;
  int machineNRanks = 1;  // ranks sharing this rank's CPUs (core/rank_placement.h)
  int cudaDev = -1;
  bool hostMode = true;
  uint64_t commHash = 0;  // identifies the communicator in logs
};

}  // namespace chorus

struct ncclComm {
  ncclComm();  // out of line: the members below own types this header only names
  ~ncclComm();
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;

  uint64_t magic = chorus::kCommMagic;
  chorus::CommIdentity id;
  chorus::CommConfig config;

  std::unique_ptr<chorus::Bootstrap> bootstrap;
  // Bytes moved and calls completed (chorusCommGetStats); before `conns`,
  // whose connectors add to it, so it outlives them.
  chorus::TrafficStats traffic;
  std::unique_ptr<chorus::ConnectionTable> conns;
  // The machines the ranks run on (built at init, immutable afterwards).
  std::shared_ptr<const chorus::topo::CommTopology> topology;
  chorus::RedOpTable redops;
  chorus::RegistrationTable registrations;
  std::unique_ptr<chorus::PlanCache> planCache;  // never null; guarded by opMutex
  chorus::OpCounters opCounters;                 // sequence numbers of the fingerprints; guarded by opMutex
  // Rings, trees and hierarchical groups (graph/comm_graph.h), searched at init.
  std::shared_ptr<const chorus::graph::CommGraph> graph;
  // GPU mode only: device, abort flag and status the kernels see, position
  // counters, launches in flight (src/gpu/cuda/comm_state.h).
  chorus::gpu::CommStatePtr gpu;
  // CHORUS_WIRE_FEEDBACK's residuals (core/wire_residuals.h); never null.
  std::unique_ptr<chorus::WireResiduals> wireResiduals;

  // Set by ncclCommAbort (or a shrink with NCCL_SHRINK_ABORT): every wait ends.
  std::atomic<bool> abortFlag{false};
  // Set by ncclCommRevoke: operations stop, management calls still work.
  std::atomic<bool> revoked{false};
  // ncclInProgress while a non-blocking init runs; the first fatal error after that.
  std::atomic<int> asyncError{ncclSuccess};
  // Operation counters and the call in flight (stall reports, status dump).
  chorus::OpActivity activity;
  bool finalized = false;

  std::mutex opMutex;  // one operation at a time per communicator
  std::thread initThread;
  int childCount = 0;  // numbers the key namespaces of split/shrink children

  std::mutex errorMutex;
  std::string errorMessage;
};

namespace chorus {

// Records a fatal error: later calls on `comm` fail fast with this message.
void commSetError(ncclComm* comm, ncclResult_t code, const std::string& message);
// ncclSuccess, or the recorded error (re-recorded as the thread's last error).
ncclResult_t commCheckUsable(ncclComm* comm, const char* fn);
// ncclInvalidUsage once ncclCommAbort or ncclCommRevoke asked the running
// operation to end (every wait of an operation checks it); else ncclSuccess.
ncclResult_t commEndedByCaller(const ncclComm* comm);

// Live communicators, so that NULL, destroyed and foreign pointers are
// rejected with a clear error instead of a crash. Each thread remembers the
// few communicators it last found live, until the next removal: a repeated
// call on one of them takes no lock (every rank thread's every call would
// otherwise take this one, shared by the whole process).
class CommRegistry {
 public:
  static CommRegistry& instance();
  void add(ncclComm* comm);
  void remove(ncclComm* comm);
  bool contains(const ncclComm* comm);
  // Calls `fn` on every live communicator, under the registry's lock (a
  // communicator is removed before it is destroyed, so each stays valid).
  void forEach(const std::function<void(const ncclComm&)>& fn);

 private:
  std::mutex mutex_;
  std::vector<const ncclComm*> live_;
  std::atomic<uint64_t> removals_{0};  // bumped by every remove, under mutex_
};

}  // namespace chorus
