// GPU memory whose release is held back while kernels run.
//
// Freeing device or pinned memory (cudaFree, cudaFreeHost,
// cudaHostUnregister, cudaIpcCloseMemHandle) waits for all work on the
// device to end. When one communicator is destroyed or aborted while another
// communicator's kernel on the same device spins waiting for a peer (in the
// usual recovery loop, one that this same thread destroys next), that wait
// never ends. So a release runs at once only when no communicator of this
// process has kernels running on the device; otherwise it is held here until
// the device is idle: checked by the GPU watchdog every period and by every
// later release. A thread that kernels wait on (the network proxy) must never
// run a release itself, even on an idle device: between the idle check and
// the free another communicator may launch a kernel that waits for that
// thread, and the free would wait for the kernel. Its releases are always
// held, for the watchdog.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace chorus::gpu {

class DeferredReleases {
 public:
  using Release = std::function<void()>;
  using BusyFn = std::function<bool(int device)>;

  // Runs `release`, and every release held for `device`, when !busy(device);
  // else holds it.
  void releaseOrHold(int device, Release release, const BusyFn& busy);
  // Holds `release` whatever the device does (a thread kernels wait on).
  void hold(int device, Release release);
  // Runs the held releases of every device that is not busy; how many ran.
  size_t runIdle(const BusyFn& busy);
  size_t held() const;

 private:
  std::vector<Release> takeHeld(int device);

  mutable std::mutex mu_;
  std::vector<std::pair<int, Release>> held_;
};

}  // namespace chorus::gpu
