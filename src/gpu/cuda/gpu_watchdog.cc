#include "gpu/cuda/gpu_watchdog.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <cuda_runtime_api.h>

#include "core/comm.h"
#include "core/exception_guard.h"
#include "core/log.h"
#include "gpu/cuda/comm_state.h"
#include "host/executor.h"
#include "transport/connection_table.h"

namespace chorus::gpu {
namespace {
constexpr auto kPeriod = std::chrono::milliseconds(20);
}

GpuWatchdog& GpuWatchdog::instance() {
  // Never destroyed: communicators may outlive static destruction order.
  static GpuWatchdog* watchdog = new GpuWatchdog();
  return *watchdog;
}

void GpuWatchdog::add(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.push_back(comm);
  if (running_) return;
  running_ = true;
  // Exits by itself once no communicator is left; an exception is logged and
  // lets the next add() start a new watchdog.
  std::thread([this] {
    if (guardedRun("GPU watchdog thread", [this] { run(); }) == ncclSuccess) return;
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }).detach();
}

void GpuWatchdog::remove(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
  cv_.notify_all();
}

void GpuWatchdog::run() {
  // Event queries are "unsafe" during another thread's global-mode stream
  // capture unless this thread is relaxed; without this the watchdog would
  // invalidate the user's CUDA graph captures.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!comms_.empty()) {
    for (ncclComm* comm : comms_) check(comm);
    cv_.wait_for(lock, kPeriod);
  }
  running_ = false;
}

void GpuWatchdog::check(ncclComm* comm) {
  CommState& st = *comm->gpu;
  if (st.statusHost->status != 0) {
    (void)commPollError(comm);
    commSignalAbort(comm);
    return;
  }
  // The communicator's device, never restored: this thread belongs to the
  // library, and switching back to device 0 would create a context there.
  (void)cudaSetDevice(st.device);
  if (!st.busy()) return;
  const PeerInfo& self = comm->conns->peer(comm->id.rank);
  for (const PeerInfo& p : comm->conns->peers()) {
    if (p.rank == self.rank || p.hostHash != self.hostHash || p.processToken == self.processToken) continue;
    if (peerProcessAlive(p.pid)) continue;
    const std::string msg = "rank " + std::to_string(comm->id.rank) + ": peer rank " + std::to_string(p.rank) +
                            " (pid " + std::to_string(p.pid) + ") exited while GPU kernels of the communicator ran";
    CHORUS_WARN(kLogColl, "%s; stopping them", msg.c_str());
    commSetError(comm, ncclRemoteError, msg);
    commSignalAbort(comm);
    return;
  }
}

}  // namespace chorus::gpu
