// In-process transport. The receiver allocates the FIFO on the heap and
// parks a shared_ptr to it in the process-wide InprocFifoRegistry under a fresh
// id; the handle is that id. The sender takes its own reference out of the
// registry, so the memory lives until both ends are gone, whichever order the
// two communicators are destroyed in.
//
// GPU mode (ranks of one process that cannot use P2P): the receiver zeroes
// the FIFO (a valid fresh FIFO for the kernels), pins and maps it once
// (host_fifo_mapping.h) and parks the mapping with the memory, so both ends
// hand the executor the same device address (the mapping is portable, and
// with unified addressing its address is the same on every device).
#include "transports/inproc/inproc_transport.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/result.h"
#include "transport/host_fifo_mapping.h"

namespace chorus {
namespace {

// A FIFO on the heap: `memory` points at its host address; `deviceBase` is
// the address kernels use (GPU mode), else null.
struct InprocFifo {
  std::shared_ptr<void> memory;
  char* deviceBase = nullptr;
};

class InprocFifoRegistry {
 public:
  static InprocFifoRegistry& instance() {
    static InprocFifoRegistry r;
    return r;
  }
  uint64_t put(InprocFifo fifo) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t id = ++next_;
    entries_[id] = std::move(fifo);
    return id;
  }
  // One-shot: the entry is removed once the sender has taken it.
  InprocFifo take(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return {};
    auto fifo = std::move(it->second);
    entries_.erase(it);
    return fifo;
  }

 private:
  std::mutex mutex_;
  uint64_t next_ = 0;
  std::unordered_map<uint64_t, InprocFifo> entries_;
};

FifoEnd viewOf(const InprocFifo& fifo, int peer) {
  FifoEnd end;
  end.ctl = static_cast<FifoControl*>(fifo.memory.get());
  end.slots = static_cast<char*>(fifo.memory.get()) + fifoControlBytes();
  end.slotBytes = end.ctl->slotBytes;
  end.nslots = end.ctl->nslots;
  end.peer = peer;
  end.peerPid = 0;
  // Host-mode threads share every address; GPU ranks here cannot reach each
  // other's device memory (else they would use p2p).
  end.peerReadsOurBuffers = fifo.deviceBase == nullptr;
  end.memory = fifo.memory;
  if (fifo.deviceBase != nullptr) pointFifoAt(&end, fifo.deviceBase);
  return end;
}

}  // namespace

bool InprocTransport::canConnect(const PeerInfo& self, const PeerInfo& peer) const {
  return self.hostHash == peer.hostHash && self.processToken == peer.processToken;
}

ncclResult_t InprocTransport::createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                                         std::vector<uint8_t>* handle) {
  const size_t bytes = fifoTotalBytes(req.slotBytes, req.nslots);
  void* raw = std::aligned_alloc(4096, bytes);
  if (raw == nullptr)
    return fail(ncclSystemError, "inproc: cannot allocate %zu bytes for %s", bytes, req.label.c_str());
  if (req.deviceMemory) std::memset(raw, 0, bytes);
  fifoInit(raw, req.slotBytes, req.nslots, getpid());
  InprocFifo fifo;
  fifo.memory = std::shared_ptr<void>(raw, [](void* p) { std::free(p); });
  CHORUS_CHECK(mapFifoForKernels(req, "inproc", raw, bytes, &fifo.memory, &fifo.deviceBase));
  *end = viewOf(fifo, req.peerRank);
  uint64_t id = InprocFifoRegistry::instance().put(std::move(fifo));
  handle->resize(sizeof(id));
  std::memcpy(handle->data(), &id, sizeof(id));
  return ncclSuccess;
}

ncclResult_t InprocTransport::connectSend(const ConnRequest& req, const PeerInfo& peer,
                                          const std::vector<uint8_t>& handle, FifoEnd* end) {
  uint64_t id = 0;
  if (handle.size() != sizeof(id)) return fail(ncclInternalError, "inproc: bad handle for %s", req.label.c_str());
  std::memcpy(&id, handle.data(), sizeof(id));
  InprocFifo fifo = InprocFifoRegistry::instance().take(id);
  if (!fifo.memory)
    return fail(ncclInternalError, "inproc: FIFO %llu for %s not found", (unsigned long long)id, req.label.c_str());
  if (req.deviceMemory != (fifo.deviceBase != nullptr))
    return fail(ncclInvalidUsage, "inproc: %s: one rank runs in GPU mode and the other in host mode",
                req.label.c_str());
  const auto* ctl = static_cast<const FifoControl*>(fifo.memory.get());
  CHORUS_CHECK(checkPeerSlots("inproc", req, ctl->slotBytes, ctl->nslots));
  *end = viewOf(fifo, req.peerRank);
  return ncclSuccess;
}

}  // namespace chorus
