// P2P transport: the receiver's FIFO is cudaMalloc'ed on its own GPU and
// zeroed (an all-zero FIFO is a fresh one for the kernels). The sender's
// kernels write slots and the tail across NVLink/PCIe and read the head from
// there; the receiver's kernels poll only local memory, which is where the
// latency matters.
//
// Reaching the memory: a sender in the same process takes a reference to
// the allocation from a process-wide registry (so the memory lives until
// both ends are gone, whichever communicator is destroyed first) and, when
// its GPU differs, enables peer access to the owner's GPU. A sender in
// another process opens the CUDA IPC handle with lazy peer access; that also
// covers two processes on one GPU (without MPS their kernels time-slice).
//
// Path level for NCCL_P2P_LEVEL (only consulted when it is set): CUDA offers
// no cheap "is this NVLink" query, so native peer atomics
// (cudaDevP2PAttrNativeAtomicSupported, which PCIe peers do not report) are
// taken to mean NVL; otherwise the sysfs PCI tree of the two GPUs gives PIX /
// PXB / PHB / SYS (p2p_policy.h). NVB and C2C are never inferred.
#include "transports/p2p/p2p_transport.h"

#include "gpu/gpu_runtime.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/host_identity.h"
#include "core/log.h"
#include "core/result.h"
#include "gpu/cuda/cuda_util.h"
#include "transports/p2p/p2p_handle.h"
#include "transports/p2p/p2p_policy.h"

namespace chorus {
namespace {

using p2p::P2pHandle;
static_assert(sizeof(cudaIpcMemHandle_t) == p2p::kP2pIpcBytes, "cudaIpcMemHandle_t changed size");

// Same-process senders find the receiver's allocation here. Entries are weak
// (a receiver whose sender never came does not pin device memory) and
// one-shot; expired ones are swept on insertion.
class P2pFifoRegistry {
 public:
  static P2pFifoRegistry& instance() {
    static P2pFifoRegistry r;
    return r;
  }
  uint64_t put(const std::shared_ptr<void>& mem) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) it = it->second.expired() ? entries_.erase(it) : ++it;
    const uint64_t id = ++next_;
    entries_[id] = mem;
    return id;
  }
  std::shared_ptr<void> take(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return nullptr;
    std::shared_ptr<void> mem = it->second.lock();
    entries_.erase(it);
    return mem;
  }

 private:
  std::mutex mutex_;
  uint64_t next_ = 0;
  std::unordered_map<uint64_t, std::weak_ptr<void>> entries_;
};

// Facts about a pair of distinct devices, probed once per process and pair
// (canConnect runs for every connection).
struct PairProbe {
  bool canAccessPeer = false;
  topo::PathType path = topo::PathType::SYS;
};

PairProbe probePair(int a, int b) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, PairProbe> cache;
  const std::pair<int, int> key = std::minmax(a, b);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  PairProbe p;
  int ab = 0, ba = 0, atomics = 0;
  if (cudaDeviceCanAccessPeer(&ab, a, b) != cudaSuccess || cudaDeviceCanAccessPeer(&ba, b, a) != cudaSuccess) {
    (void)cudaGetLastError();
    ab = ba = 0;
  }
  p.canAccessPeer = ab != 0 && ba != 0;
  if (p.canAccessPeer &&
      cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, key.first, key.second) == cudaSuccess &&
      atomics != 0) {
    p.path = topo::PathType::NVL;
  } else {
    (void)cudaGetLastError();
    p.path = p2p::pciPathFromSysfs(gpu::pciBusId(key.first), gpu::pciBusId(key.second));
  }
  CHORUS_INFO(kLogP2P, "p2p: devices %d and %d: peer access %s, path %s", key.first, key.second,
              p.canAccessPeer ? "yes" : "no", topo::pathTypeName(p.path));
  cache[key] = p;
  return p;
}

// Says once per device pair and reason why P2P is not used (canConnect is
// asked for every connection).
void noteRefusal(int a, int b, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> said;
  const std::pair<int, int> key = std::minmax(a, b);
  const std::string line = std::to_string(key.first) + "/" + std::to_string(key.second) + ": " + why;
  std::lock_guard<std::mutex> lock(mu);
  if (said.insert(line).second)
    CHORUS_INFO(kLogP2P, "p2p: not used between devices %d and %d: %s; staging through host memory instead", key.first,
                key.second, why.c_str());
}

// Two processes driving one GPU work without MPS, but their kernels only
// time-slice; say so once per process (a fork()ed child is a new process).
void adviseMpsOncePerProcess() {
  static std::atomic<pid_t> advisedIn{0};
  const pid_t self = getpid();
  if (advisedIn.exchange(self) == self) return;
  if (p2p::mpsControlPipePresent()) return;
  CHORUS_INFO(kLogP2P | kLogInit,
              "p2p: ranks in separate processes share a GPU and MPS does not seem to run (no control pipe in "
              "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}): collectives complete, but their kernels are time-sliced "
              "and slow; start MPS (nvidia-cuda-mps-control -d) for speed");
}

ncclResult_t switchTo(const gpu::DeviceScope& scope, int device, const ConnRequest& req) {
  if (scope.status() == cudaSuccess) return ncclSuccess;
  const cudaError_t err = scope.status();
  (void)cudaGetLastError();
  return fail(ncclUnhandledCudaError, "p2p: %s: cannot make device %d current: %s: %s", req.label.c_str(), device,
              cudaGetErrorName(err), cudaGetErrorString(err));
}

ncclResult_t requireGpuRequest(const ConnRequest& req, const char* what) {
  if (req.deviceMemory && req.selfDevice >= 0) return ncclSuccess;
  return fail(ncclInternalError, "p2p: %s: %s for a connection that is not in GPU mode (device %d)", req.label.c_str(),
              what, req.selfDevice);
}

FifoEnd viewOf(std::shared_ptr<void> mem, const ConnRequest& req, int peerPid) {
  FifoEnd end;
  end.ctl = static_cast<FifoControl*>(mem.get());
  end.slots = static_cast<char*>(mem.get()) + fifoControlBytes();
  end.slotBytes = req.slotBytes;
  end.nslots = req.nslots;
  end.peer = req.peerRank;
  end.peerPid = peerPid;
  end.memory = std::move(mem);
  return end;
}

ncclResult_t enablePeerAccess(int from, int to, const ConnRequest& req) {
  gpu::DeviceScope scope(from);
  CHORUS_CHECK(switchTo(scope, from, req));
  gpu::RelaxedCaptureScope relaxed;
  const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaSuccess) return ncclSuccess;
  (void)cudaGetLastError();
  if (err == cudaErrorPeerAccessAlreadyEnabled) return ncclSuccess;
  return fail(ncclUnhandledCudaError,
              "p2p: %s: enabling access from device %d to device %d failed: %s: %s (NCCL_P2P_DISABLE=1 stages "
              "through host memory instead)",
              req.label.c_str(), from, to, cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace

bool P2pTransport::canConnect(const PeerInfo& self, const PeerInfo& peer) const {
  if (!p2p::p2pCandidates(self, peer)) return false;
  p2p::P2pPairFacts facts;
  facts.sameDevice = sameGpu(self, peer);
  if (!facts.sameDevice) {
    // The peer's GPU in this process's numbering (processes may see
    // different CUDA_VISIBLE_DEVICES); not visible here means no P2P.
    const int peerHere = peer.busId[0] != '\0' ? gpu::deviceWithBusId(peer.busId) : peer.cudaDev;
    if (peerHere < 0) {
      noteRefusal(self.cudaDev, peer.cudaDev, "the peer's GPU is not visible to this process");
      return false;
    }
    const PairProbe probe = probePair(self.cudaDev, peerHere);
    facts.canAccessPeer = probe.canAccessPeer;
    facts.path = probe.path;
  }
  std::string why;
  if (p2p::p2pAllowed(p2p::currentP2pSettings(), facts, &why)) return true;
  noteRefusal(self.cudaDev, peer.cudaDev, why);
  return false;
}

ncclResult_t P2pTransport::createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                                      std::vector<uint8_t>* handle) {
  CHORUS_CHECK(requireGpuRequest(req, "createRecv"));
  const int device = req.selfDevice;
  const size_t bytes = fifoTotalBytes(req.slotBytes, req.nslots);
  const bool sameProcess = peer.processToken == processToken();
  // Memory exported through CUDA IPC is shared by allocation granule (2 MiB):
  // a FIFO of its own granules exposes nothing else of this process.
  constexpr size_t kIpcGranule = size_t(2) << 20;
  const size_t allocBytes = sameProcess ? bytes : (bytes + kIpcGranule - 1) / kIpcGranule * kIpcGranule;
  gpu::DeviceScope scope(device);
  CHORUS_CHECK(switchTo(scope, device, req));
  gpu::RelaxedCaptureScope relaxed;
  void* base = nullptr;
  const cudaError_t err = cudaMalloc(&base, allocBytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclUnhandledCudaError, "p2p: %s: cudaMalloc of %zu KiB on device %d failed: %s: %s", req.label.c_str(),
                allocBytes >> 10, device, cudaGetErrorName(err), cudaGetErrorString(err));
  }
  std::shared_ptr<void> mem(base, [device](void* p) {
    gpu::releaseWhenIdle(device, [device, p] {
      gpu::DeviceScope s(device);
      gpu::RelaxedCaptureScope r;
      (void)cudaFree(p);
    });
  });
  CHORUS_CHECK(gpu::zeroDeviceMemory(base, allocBytes));

  P2pHandle h;
  h.ownerPid = getpid();
  h.device = device;
  h.processToken = processToken();
  h.pointer = reinterpret_cast<uintptr_t>(base);
  h.totalBytes = bytes;
  h.slotBytes = req.slotBytes;
  h.nslots = req.nslots;
  snprintf(h.busId, sizeof(h.busId), "%s", gpu::pciBusId(device).c_str());
  if (sameProcess) {
    h.registryId = P2pFifoRegistry::instance().put(mem);
  } else {
    cudaIpcMemHandle_t ipc;
    CHORUS_CUDA_CHECK(cudaIpcGetMemHandle(&ipc, base));
    std::memcpy(h.ipc, &ipc, sizeof(ipc));
    h.hasIpc = 1;
  }
  p2p::encodeP2pHandle(h, handle);
  *end = viewOf(std::move(mem), req, sameProcess ? 0 : peer.pid);
  CHORUS_INFO(kLogP2P, "p2p: %s: FIFO of %zu KiB on device %d (%s), sender reaches it %s", req.label.c_str(),
              bytes >> 10, device, h.busId, sameProcess ? "by pointer" : "through CUDA IPC");
  return ncclSuccess;
}

ncclResult_t P2pTransport::connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                                       FifoEnd* end) {
  P2pHandle h;
  CHORUS_CHECK(p2p::decodeP2pHandle(handle, req, &h));
  CHORUS_CHECK(requireGpuRequest(req, "connectSend"));
  const int device = req.selfDevice;

  if (h.processToken == processToken()) {
    std::shared_ptr<void> mem = P2pFifoRegistry::instance().take(h.registryId);
    if (!mem || reinterpret_cast<uintptr_t>(mem.get()) != h.pointer)
      return fail(ncclInternalError,
                  "p2p: %s: the FIFO rank %d created in this process (entry %llu) is gone; was its communicator "
                  "destroyed, or did this connection already happen?",
                  req.label.c_str(), req.peerRank, (unsigned long long)h.registryId);
    if (h.device != device) CHORUS_CHECK(enablePeerAccess(device, h.device, req));
    *end = viewOf(std::move(mem), req, 0);
    // Zero-copy sends (kernels/common/direct_slot.h) on one GPU only: a
    // kernel on another GPU could reach only plain allocations of ours, and
    // only with peer access both ways; pool, VMM and other devices' memory
    // that users may register would fault there.
    end->peerReadsOurBuffers = h.device == device;
    return ncclSuccess;
  }

  if (!h.hasIpc)
    return fail(ncclInternalError,
                "p2p: %s: rank %d (pid %d) made its FIFO for a sender in its own process, but this rank is pid %d",
                req.label.c_str(), req.peerRank, h.ownerPid, static_cast<int>(getpid()));
  gpu::DeviceScope scope(device);
  CHORUS_CHECK(switchTo(scope, device, req));
  gpu::RelaxedCaptureScope relaxed;
  cudaIpcMemHandle_t ipc;
  std::memcpy(&ipc, h.ipc, sizeof(ipc));
  void* base = nullptr;
  const cudaError_t err = cudaIpcOpenMemHandle(&base, ipc, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fail(ncclUnhandledCudaError,
                "p2p: %s: cannot open the FIFO of rank %d (pid %d, GPU %s) from device %d: %s: %s (CUDA IPC needs "
                "both processes to see the GPUs and to share an IPC namespace; NCCL_P2P_DISABLE=1 stages through "
                "host memory instead)",
                req.label.c_str(), req.peerRank, h.ownerPid, h.busId, device, cudaGetErrorName(err),
                cudaGetErrorString(err));
  }
  std::shared_ptr<void> mem(base, [device](void* p) {
    gpu::releaseWhenIdle(device, [device, p] {
      gpu::DeviceScope s(device);
      gpu::RelaxedCaptureScope r;
      (void)cudaIpcCloseMemHandle(p);
    });
  });
  const std::string mine = gpu::pciBusId(device);
  if (!mine.empty() && strcasecmp(mine.c_str(), h.busId) == 0) adviseMpsOncePerProcess();
  *end = viewOf(std::move(mem), req, peer.pid);
  CHORUS_INFO(kLogP2P, "p2p: %s: sender on device %d opened rank %d's FIFO (pid %d, GPU %s)", req.label.c_str(), device,
              req.peerRank, h.ownerPid, h.busId);
  return ncclSuccess;
}

}  // namespace chorus
