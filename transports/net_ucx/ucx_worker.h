// The UCP context and worker every UCX connection of this process shares
// (one device, so one worker). Connections, listeners and requests of all
// threads go through it, so every UCP call on it -- progress included --
// happens under `mu`; the worker is created SERIALIZED and the lock provides
// the serialization. Created on first use, destroyed with its last user.
#pragma once

#include <cstdint>
#include <mutex>

#include "nccl.h"
#include "transports/net_ucx/ucx_api.h"

namespace chorus::ucx {

struct UcxWorker {
  const UcpApi* api = nullptr;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  std::mutex mu;
  uint32_t lastConnId = 0;  // receiver-side connection ids, under mu
  int users = 0;            // under the registry's lock
  int stuckCloses = 0;      // endpoints whose close never finished (under mu)

  // Drives UCX until it reports no more immediate work (a bounded number of
  // rounds). Caller holds mu.
  void progress();
  // The next connection id (never 0). Caller holds mu.
  uint32_t nextConnId();
};

// The registry of the process-wide worker.
class UcxWorkerRegistry {
 public:
  // Returns the shared worker, creating it on first use.
  static ncclResult_t acquire(UcxWorker** out);
  static void release(UcxWorker* worker);
};

// Whether UCX on this machine handles CUDA memory (it reports the CUDA memory
// type); computed with a short-lived context on first call.
bool ucxSupportsCudaMemory();

}  // namespace chorus::ucx
