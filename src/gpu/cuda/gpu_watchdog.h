// The process's GPU watchdog: one thread that, every few milliseconds, looks
// at each GPU-mode communicator with kernels in flight. A failure a kernel
// recorded (timeout, mismatch) becomes the communicator's asynchronous error
// and raises its abort flag so the other lanes stop too; a peer process on
// this host that exited does the same, so a dead peer costs milliseconds, not
// the no-progress timeout. While kernels run it also watches for stalls: when
// none of the communicator's lanes made progress for CHORUS_STALL_WARN_S
// (what the lanes report in dev::LaneWaits), the host executor's StallWatch
// compares notes with the peers and logs the same WARN line (and status
// file). It runs only while GPU communicators exist.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "gpu/deferred_release.h"
#include "host/stall_watch.h"

struct ncclComm;

namespace chorus::gpu {

class GpuWatchdog {
 public:
  static GpuWatchdog& instance();
  void add(ncclComm* comm);
  // After remove() returns the watchdog no longer touches `comm`.
  void remove(ncclComm* comm);
  // Whether a communicator it watches has kernels in flight on `device`.
  bool anyBusy(int device);
  // GPU memory releases held while such kernels run (releaseWhenIdle); the
  // watchdog runs them once the device is idle.
  DeferredReleases& releases() { return releases_; }
  // Holds `release` for the watchdog thread to run once the device is idle,
  // if that thread runs (false: it does not, so no GPU communicator, and no
  // kernel of this process, is left to wait on the caller).
  bool holdForWatchdog(int device, DeferredReleases::Release release);

 private:
  GpuWatchdog() = default;
  void run();
  void check(ncclComm* comm);
  bool judgeNotes(ncclComm* comm);
  void watchStall(ncclComm* comm, bool busy);

  // Per communicator: what its lanes last reported, and since when that is unchanged.
  struct Stall {
    StallWatch watch;
    StallWatch::Clock::time_point lastProgress{};
    std::vector<uint64_t> seen;
    bool busy = false;
  };
  std::map<ncclComm*, Stall> stalls_;

  std::mutex mutex_;  // guards comms_ and is held while checking them
  std::condition_variable cv_;
  std::vector<ncclComm*> comms_;
  bool running_ = false;
  DeferredReleases releases_;
};

}  // namespace chorus::gpu
