#include "gpu/cuda/comm_state.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "core/comm.h"
#include "core/log.h"
#include "core/peer_watch.h"
#include "core/wait_limit.h"
#include "gpu/cuda/cuda_util.h"
#include "gpu/cuda/gpu_watchdog.h"
#include "gpu/lane_waits.h"
#include "gpu/launch_policy.h"
#include "kernels/common/direct_slot.h"
#include "kernels/launch.h"
#include "plan/lane_failure.h"
#include "transport/connection_table.h"

namespace chorus::gpu {
namespace {

// Channels a GPU-mode communicator uses when the user did not choose: enough
// blocks to move data at a good fraction of the device's bandwidth, few
// enough that several ranks sharing the GPU still fit.
constexpr int kDefaultGpuChannels = 16;

// The device's per-thread stack limit covers every kernel of this build
// from the start. A launch that needs more makes the driver grow the limit,
// and growing it waits for all work on the device to end: with another
// rank's kernel spinning until this thread launches its own, that never
// happens. Raising it here, before this process's first launch on the
// device, costs the difference times the threads the device holds at once.
ncclResult_t reserveStack(int device, size_t needed) {
  size_t limit = 0;
  CHORUS_CUDA_CHECK(cudaDeviceGetLimit(&limit, cudaLimitStackSize));
  if (needed <= limit) return ncclSuccess;
  CHORUS_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitStackSize, needed));
  int sms = 0, threadsPerSm = 0;
  CHORUS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CHORUS_CUDA_CHECK(cudaDeviceGetAttribute(&threadsPerSm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  const double mib = double(needed - limit) * sms * threadsPerSm / double(1 << 20);
  CHORUS_INFO(kLogInit,
              "GPU %d: per-thread stack limit raised from %zu to %zu bytes (the wire kernels'), about %.0f MiB", device,
              limit, needed, mib);
  return ncclSuccess;
}

// Lane and wire kernels are loaded once per device, before the first launch
// (see preloadLaneKernels in kernels/launch.h), and their stack reserved.
ncclResult_t preloadOnce(int device) {
  static std::mutex mu;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.count(device) != 0) return ncclSuccess;
  size_t stackBytes = 0;
  CHORUS_CUDA_CHECK(dev::preloadLaneKernels(&stackBytes));
  CHORUS_CHECK(reserveStack(device, stackBytes));
  loaded.insert(device);
  return ncclSuccess;
}

ncclResult_t allocMapped(size_t bytes, void** host, void** device) {
  CHORUS_CUDA_CHECK(cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(*host, 0, bytes);
  if (const cudaError_t err = cudaHostGetDevicePointer(device, *host, 0); err != cudaSuccess) {
    (void)cudaFreeHost(*host);  // not yet held by the CommState that frees the others
    *host = nullptr;
    return cudaFailure(err, "cudaHostGetDevicePointer", __FILE__, __LINE__);
  }
  return ncclSuccess;
}

int ranksSharingDevice(const ncclComm* comm) {
  const PeerInfo& self = comm->conns->peer(comm->id.rank);
  int n = 0;
  for (const PeerInfo& p : comm->conns->peers())
    if (sameGpu(p, self)) ++n;
  return std::max(n, 1);
}

void sizeLaunches(ncclComm* comm, CommState* st, int sms) {
  st->ranksOnDevice = ranksSharingDevice(comm);
  st->maxLanes = lanesPerLaunch(sms, st->ranksOnDevice, dev::kLaunchMaxLanes);
  fitChannels(st->maxLanes, kDefaultGpuChannels, &comm->config);
}

}  // namespace

void CommStateDeleter::operator()(CommState* state) const { delete state; }

PositionPool::~PositionPool() { release(); }

void PositionPool::release() {
  for (uint64_t* b : blocks_) (void)cudaFree(b);
  blocks_.clear();
  counters_.clear();
  usedInBlock_ = kBlock;
}

uint64_t* PositionPool::counterFor(const FifoControl* fifo, bool sender) {
  auto key = std::make_pair(fifo, sender);
  auto it = counters_.find(key);
  if (it != counters_.end()) return it->second;
  if (usedInBlock_ == kBlock) {
    RelaxedCaptureScope relaxed;
    void* block = nullptr;
    if (cudaMalloc(&block, kBlock * sizeof(uint64_t)) != cudaSuccess) return nullptr;
    if (zeroDeviceMemory(block, kBlock * sizeof(uint64_t)) != ncclSuccess) {
      (void)cudaFree(block);
      return nullptr;
    }
    blocks_.push_back(static_cast<uint64_t*>(block));
    usedInBlock_ = 0;
  }
  uint64_t* counter = blocks_.back() + usedInBlock_++;
  counters_.emplace(key, counter);
  return counter;
}

bool markerFinished(void* marker) {
  if (marker == nullptr) return true;
  if (cudaEventQuery(static_cast<cudaEvent_t>(marker)) != cudaErrorNotReady) return true;
  (void)cudaGetLastError();  // NotReady is also recorded as the thread's last error
  return false;
}

CommState::~CommState() {
  DeviceScope scope(device);
  positions.release();  // inside the scope: members are destroyed after it ends
  for (void* m : recentCalls.markers()) (void)cudaEventDestroy(static_cast<cudaEvent_t>(m));
  for (cudaEvent_t e : spareMarkers) (void)cudaEventDestroy(e);
  for (auto& [stream, event] : inFlight) (void)cudaEventDestroy(event);
  if (last != nullptr) (void)cudaEventDestroy(last);
  if (abortHost != nullptr) (void)cudaFreeHost(abortHost);
  if (statusHost != nullptr) (void)cudaFreeHost(statusHost);
  if (waitsHost != nullptr) (void)cudaFreeHost(waitsHost);
}

bool CommState::busy() {
  // Called from user threads (finalize, destroy) and the proxy (deferred
  // releases): an event query must not break another thread's global-mode
  // capture (torch.cuda.graph's default), nor make a context on another GPU
  // in a thread that never chose one (a non-blocking finalize's).
  DeviceScope scope(device);
  RelaxedCaptureScope relaxed;
  std::lock_guard<std::mutex> lock(launchMutex);
  for (auto& [stream, event] : inFlight) {
    if (cudaEventQuery(event) != cudaErrorNotReady) continue;
    (void)cudaGetLastError();  // NotReady is also recorded as the thread's last error
    return true;
  }
  return false;
}

bool CommState::waitIdle(int64_t boundMs) { return waitIdle(boundMs, {}); }

bool CommState::waitIdle(int64_t boundMs, const std::function<void()>& watch) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(boundMs);
  auto nextWatch = start;
  while (busy()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (watch && now >= nextWatch) {
      watch();
      nextWatch = now + std::chrono::milliseconds(50);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

ncclResult_t commSetup(ncclComm* comm) {
  auto st = std::make_unique<CommState>();
  st->device = comm->id.cudaDev;
  DeviceScope scope(st->device);
  CHORUS_CUDA_CHECK(scope.status());
  RelaxedCaptureScope relaxed;
  void* host = nullptr;
  void* device = nullptr;
  CHORUS_CHECK(allocMapped(sizeof(int32_t) * 16, &host, &device));
  st->abortHost = static_cast<int32_t*>(host);
  st->abortDevice = static_cast<int32_t*>(device);
  CHORUS_CHECK(allocMapped(sizeof(dev::LaneStatusRecord), &host, &device));
  st->statusHost = static_cast<dev::LaneStatusRecord*>(host);
  st->statusDevice = static_cast<dev::LaneStatusRecord*>(device);
  CHORUS_CHECK(allocMapped(sizeof(dev::LaneWaits), &host, &device));
  st->waitsHost = static_cast<dev::LaneWaits*>(host);
  st->waitsDevice = static_cast<dev::LaneWaits*>(device);
  clearLaneWaits(st->waitsHost);
  CHORUS_CHECK(preloadOnce(st->device));
  int sms = 0;
  CHORUS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, st->device));
  sizeLaunches(comm, st.get(), sms);
  CHORUS_INFO(kLogInit,
              "comm %p rank %d: GPU %d (%d SMs) shared by %d rank(s) of the communicator; at most %d blocks per "
              "launch, channels %d..%d",
              (void*)comm, comm->id.rank, st->device, sms, st->ranksOnDevice, st->maxLanes, comm->config.minChannels,
              comm->config.maxChannels);
  comm->gpu.reset(st.release());
  GpuWatchdog::instance().add(comm);
  return ncclSuccess;
}

void commSignalAbort(ncclComm* comm) {
  if (!comm->gpu) return;
  volatile int32_t* flag = comm->gpu->abortHost;
  *flag = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// How long destroy/finalize wait for running kernels: CHORUS_TIMEOUT_MS when
// set (at least 1 s), else until they end (a dead peer or an abort ends them).
namespace {
int64_t kernelWaitMs(const ncclComm* comm) {
  return comm->config.timeoutMs > 0 ? std::max<int64_t>(comm->config.timeoutMs, 1000) : kMaxWaitLimitMs;
}
}  // namespace

void commTeardown(ncclComm* comm, bool abort) {
  if (!comm->gpu) return;
  GpuWatchdog::instance().remove(comm);
  CommState& st = *comm->gpu;
  const int64_t bound = kernelWaitMs(comm);
  if (!abort && !st.waitIdle(bound)) {
    CHORUS_WARN(kLogInit, "comm %p rank %d: kernels still running %lld ms into destroy; stopping them", (void*)comm,
                comm->id.rank, static_cast<long long>(bound));
    abort = true;
  }
  if (abort) {
    commSignalAbort(comm);
    if (!st.waitIdle(std::min(bound, kCloseDrainMs))) {
      // A kernel that ignores the abort flag cannot be stopped from the host:
      // leak its memory rather than free what it may still touch, and return.
      CHORUS_WARN(kLogInit, "comm %p rank %d: kernels did not stop within %lld ms of the abort; leaking their memory",
                  (void*)comm, comm->id.rank, static_cast<long long>(std::min(bound, kCloseDrainMs)));
      (void)comm->gpu.release();
      (void)comm->conns.release();  // nor the FIFOs it may still be using
      return;
    }
  }
  // Its pinned and device memory is freed once no other communicator's
  // kernel runs on the device (releaseWhenIdle).
  const int device = comm->gpu->device;
  std::shared_ptr<CommState> state(comm->gpu.release(), CommStateDeleter{});
  releaseWhenIdle(device, [state]() mutable { state.reset(); });
}

std::string commStopForGonePeer(ncclComm* comm, const std::string& why) {
  const std::string msg =
      "rank " + std::to_string(comm->id.rank) + ": " + why + " while GPU kernels of the communicator ran";
  CHORUS_WARN(kLogColl, "%s; stopping them", msg.c_str());
  commSetError(comm, ncclRemoteError, msg);
  commSignalAbort(comm);
  return msg;
}

ncclResult_t commDrain(ncclComm* comm) {
  if (!comm->gpu) return ncclSuccess;
  const int64_t bound = kernelWaitMs(comm);
  std::string stopped;  // the message, once a gone peer stopped the kernels
  const bool idle = comm->gpu->waitIdle(bound, [&] {
    std::string why;
    if (stopped.empty() && commPeerGone(comm, &why)) stopped = commStopForGonePeer(comm, why);
  });
  CHORUS_CHECK(commPollError(comm));
  if (!stopped.empty()) return fail(ncclRemoteError, "%s", stopped.c_str());
  if (!idle)
    return fail(ncclRemoteError, "rank %d: the communicator's GPU kernels did not finish within %lld ms", comm->id.rank,
                static_cast<long long>(bound));
  return ncclSuccess;
}

ncclResult_t commPollError(ncclComm* comm) {
  if (!comm->gpu) return ncclSuccess;
  CommState& st = *comm->gpu;
  const volatile dev::LaneStatusRecord* rec = st.statusHost;
  const int32_t status = rec->status;
  if (status == 0) return ncclSuccess;
  std::atomic_thread_fence(std::memory_order_acquire);
  step::LaneFailure f;
  f.status = status;
  f.lane = rec->lane;
  f.peer = rec->peer;
  f.detail = rec->detail;
  f.received = rec->received;
  f.expected = rec->expected;
  if (status == static_cast<int32_t>(step::LaneStatus::OpMismatch))
    std::memcpy(&f.mismatch, const_cast<const OpMismatchRecord*>(&rec->mismatch), sizeof(f.mismatch));
  char msg[384];
  const ncclResult_t code = describeLaneFailure(f, comm->id.rank, comm->config.timeoutMs, msg, sizeof(msg));
  if (!st.errorReported.exchange(true)) CHORUS_WARN(kLogColl, "%s", msg);
  commSetError(comm, code, msg);
  return fail(code, "%s", msg);
}

}  // namespace chorus::gpu
