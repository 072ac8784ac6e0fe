// In-process transport. The receiver allocates the FIFO on the heap and
// parks a shared_ptr to it in the process-wide InprocFifoRegistry under a fresh
// id; the handle is that id. The sender takes its own reference out of the
// registry, so the memory lives until both ends are gone, whichever order the
// two communicators are destroyed in.
#include "transports/inproc/inproc_transport.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/result.h"

namespace chorus {
namespace {

class InprocFifoRegistry {
 public:
  static InprocFifoRegistry& instance() {
    static InprocFifoRegistry r;
    return r;
  }
  uint64_t put(std::shared_ptr<void> mem) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t id = ++next_;
    entries_[id] = std::move(mem);
    return id;
  }
  // One-shot: the entry is removed once the sender has taken it.
  std::shared_ptr<void> take(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    auto mem = std::move(it->second);
    entries_.erase(it);
    return mem;
  }

 private:
  std::mutex mutex_;
  uint64_t next_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<void>> entries_;
};

FifoEnd viewOf(const std::shared_ptr<void>& mem, int peer) {
  FifoEnd end;
  end.ctl = static_cast<FifoControl*>(mem.get());
  end.slots = static_cast<char*>(mem.get()) + fifoControlBytes();
  end.slotBytes = end.ctl->slotBytes;
  end.nslots = end.ctl->nslots;
  end.peer = peer;
  end.peerPid = 0;
  end.memory = mem;
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
  if (raw == nullptr) return fail(ncclSystemError, "inproc: cannot allocate %zu bytes for %s", bytes, req.label.c_str());
  fifoInit(raw, req.slotBytes, req.nslots, getpid());
  std::shared_ptr<void> mem(raw, [](void* p) { std::free(p); });
  *end = viewOf(mem, req.peerRank);
  uint64_t id = InprocFifoRegistry::instance().put(mem);
  handle->resize(sizeof(id));
  std::memcpy(handle->data(), &id, sizeof(id));
  return ncclSuccess;
}

ncclResult_t InprocTransport::connectSend(const ConnRequest& req, const PeerInfo& peer,
                                          const std::vector<uint8_t>& handle, FifoEnd* end) {
  uint64_t id = 0;
  if (handle.size() != sizeof(id)) return fail(ncclInternalError, "inproc: bad handle for %s", req.label.c_str());
  std::memcpy(&id, handle.data(), sizeof(id));
  std::shared_ptr<void> mem = InprocFifoRegistry::instance().take(id);
  if (!mem) return fail(ncclInternalError, "inproc: FIFO %llu for %s not found", (unsigned long long)id, req.label.c_str());
  *end = viewOf(mem, req.peerRank);
  return ncclSuccess;
}

}  // namespace chorus
