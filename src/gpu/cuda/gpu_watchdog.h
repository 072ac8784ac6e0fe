// The process's GPU watchdog: one thread that, every few milliseconds, looks
// at each GPU-mode communicator with kernels in flight. A failure a kernel
// recorded (timeout, mismatch) becomes the communicator's asynchronous error
// and raises its abort flag so the other lanes stop too; a peer process on
// this host that exited does the same, so a dead peer costs milliseconds, not
// the no-progress timeout. It runs only while GPU communicators exist.
#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

struct ncclComm;

namespace chorus::gpu {

class GpuWatchdog {
 public:
  static GpuWatchdog& instance();
  void add(ncclComm* comm);
  // After remove() returns the watchdog no longer touches `comm`.
  void remove(ncclComm* comm);

 private:
  GpuWatchdog() = default;
  void run();
  void check(ncclComm* comm);

  std::mutex mutex_;  // guards comms_ and is held while checking them
  std::condition_variable cv_;
  std::vector<ncclComm*> comms_;
  bool running_ = false;
};

}  // namespace chorus::gpu
