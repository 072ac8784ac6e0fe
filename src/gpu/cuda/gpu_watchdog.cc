#include "gpu/cuda/gpu_watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

#include <cuda_runtime_api.h>

#include "core/comm.h"
#include "core/exception_guard.h"
#include "core/log.h"
#include "core/peer_watch.h"
#include "gpu/cuda/comm_state.h"
#include "gpu/lane_waits.h"
#include "host/executor.h"
#include "plan/setup_notes.h"
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
  stalls_.erase(comm);
  cv_.notify_all();
}

void GpuWatchdog::run() {
  // Event queries are "unsafe" during another thread's global-mode stream
  // capture unless this thread is relaxed; without this the watchdog would
  // invalidate the user's CUDA graph captures.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  std::unique_lock<std::mutex> lock(mutex_);
  // Releases held for it outlive the last communicator: it runs them first.
  while (!comms_.empty() || releases_.held() != 0) {
    for (ncclComm* comm : comms_) check(comm);
    if (releases_.held() != 0) {  // released without the lock: anyBusy takes it
      lock.unlock();
      releases_.runIdle([this](int device) { return anyBusy(device); });
      lock.lock();
    }
    cv_.wait_for(lock, kPeriod);
  }
  running_ = false;
}

bool GpuWatchdog::anyBusy(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (ncclComm* comm : comms_)
    if (comm->gpu && comm->gpu->device == device && comm->gpu->busy()) return true;
  return false;
}

bool GpuWatchdog::holdForWatchdog(int device, DeferredReleases::Release release) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!running_) return false;
  releases_.hold(device, std::move(release));
  cv_.notify_all();
  return true;
}

namespace {
thread_local bool kernelsWaitOnThisThread = false;
}

void declareKernelsWaitOnThisThread() { kernelsWaitOnThisThread = true; }

void releaseWhenIdle(int device, std::function<void()> release) {
  GpuWatchdog& w = GpuWatchdog::instance();
  if (kernelsWaitOnThisThread && w.holdForWatchdog(device, release)) return;
  w.releases().releaseOrHold(device, std::move(release), [&w](int d) { return w.anyBusy(d); });
}

// A peer whose mismatched call waits in connection setup for this rank
// sends its setup note; this rank's calls were enqueued, so here is where
// it is read (plan/setup_notes.h, readNotesAgainstLaunched). A mismatch
// fails the communicator naming both calls, stops its kernels and leaves the
// verdict on its connectors; the verdict note ends the peer's wait. Skipped
// while a call holds the communicator (it reads notes itself in setup).
bool GpuWatchdog::judgeNotes(ncclComm* comm) {
  CommState& st = *comm->gpu;
  if (st.verdictSpread || !comm->opMutex.try_lock()) return false;
  std::lock_guard<std::mutex> op(comm->opMutex, std::adopt_lock);
  std::vector<void*> forgotten;
  st.recentCalls.prune(markerFinished, &forgotten);
  for (void* m : forgotten) st.spareMarkers.push_back(static_cast<cudaEvent_t>(m));
  OpMismatchRecord r;
  bool self = false;
  if (!readNotesAgainstLaunched(comm, st.recentCalls.tasks(), &r, &self)) return false;
  char text[400];
  describeOpMismatch(r, text, sizeof(text));
  std::string msg = "rank " + std::to_string(comm->id.rank) + ": " + text;
  if (!self) msg += " (rank " + std::to_string(r.rank) + " stopped too)";
  CHORUS_WARN(kLogColl, "%s; stopping the communicator's kernels", msg.c_str());
  commSetError(comm, ncclInvalidUsage, msg);
  st.verdictSpread = true;
  spreadVerdict(comm, r);
  commSignalAbort(comm);
  return true;
}

void GpuWatchdog::check(ncclComm* comm) {
  CommState& st = *comm->gpu;
  // The communicator's device, never restored: this thread belongs to the
  // library, and switching back to device 0 would create a context there.
  (void)cudaSetDevice(st.device);
  const volatile dev::LaneStatusRecord* rec = st.statusHost;
  if (rec->status != 0) {
    (void)commPollError(comm);
    commSignalAbort(comm);
    // The connector table is the communicator's (guarded by its opMutex): a
    // call in progress defers the spread to a later check.
    if (rec->status == static_cast<int32_t>(step::LaneStatus::OpMismatch) && !st.verdictSpread &&
        comm->opMutex.try_lock()) {
      std::lock_guard<std::mutex> op(comm->opMutex, std::adopt_lock);
      st.verdictSpread = true;
      std::atomic_thread_fence(std::memory_order_acquire);
      OpMismatchRecord r;
      std::memcpy(&r, const_cast<const OpMismatchRecord*>(&rec->mismatch), sizeof(r));
      spreadVerdict(comm, r);
    }
    return;
  }
  const bool busy = st.busy();
  watchStall(comm, busy);
  if (!busy) return;
  if (judgeNotes(comm)) return;
  std::string why;
  bool gone = commPeerProcessGone(comm, &why);
  // A network link the proxy found broken (a remote peer or its host gone).
  // The connection table is guarded by the opMutex: a call in progress
  // defers the look to a later check.
  if (!gone && comm->opMutex.try_lock()) {
    std::lock_guard<std::mutex> op(comm->opMutex, std::adopt_lock);
    gone = comm->conns->brokenLink(&why);
  }
  if (gone) commStopForGonePeer(comm, why);
}

// No progress = the communicator's kernels run and no lane's report changed
// (a lane writes when it starts waiting after progress, and when it ends).
void GpuWatchdog::watchStall(ncclComm* comm, bool busy) {
  Stall& s = stalls_[comm];
  const auto now = StallWatch::Clock::now();
  const volatile dev::LaneWaits* w = comm->gpu->waitsHost;
  constexpr size_t kLanes = sizeof(w->word) / sizeof(w->word[0]);
  s.seen.resize(kLanes);
  bool changed = false;
  for (size_t i = 0; i < kLanes; ++i) {
    const uint64_t word = w->word[i];
    changed |= word != s.seen[i];
    s.seen[i] = word;
  }
  const LongestWait longest = longestWait(*w);
  const StallSubject subject{comm, longest.peer, longest.receiving, true};
  if (!busy || !s.busy || changed) s.lastProgress = now;
  if (!busy) {
    if (s.busy) s.watch.resumed();
    s.busy = false;
    return;
  }
  s.busy = true;
  s.watch.idle(subject, s.lastProgress, now);
}

}  // namespace chorus::gpu
