// Bounded waiting on the device. Every spin loop in the kernels goes through
// a Waiter: it re-reads the abort flag and the clock every kCheckEvery
// iterations and gives up (recording why, once per launch) when the flag is
// set or the deadline passes, so a dead or stuck peer stops the kernel
// instead of hanging the GPU.
#pragma once

#include <cstdint>

#include "kernels/lane_plan.h"

namespace chorus::dev {

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Records the first failure of a launch (a record made by the shared
// constructors of kernels/common/step_rules.h); later ones are dropped.
__device__ inline void recordFailure(LaneStatusRecord* rec, const step::LaneFailure& f) {
  if (rec == nullptr) return;
  if (atomicCAS(&rec->claim, 0, 1) == 0) {
    rec->lane = f.lane;
    rec->peer = f.peer;
    rec->detail = f.detail;
    rec->received = f.received;
    rec->expected = f.expected;
    __threadfence_system();
    *reinterpret_cast<volatile int32_t*>(&rec->status) = f.status;
    __threadfence_system();
  }
}

class Waiter {
 public:
  static constexpr uint32_t kCheckEvery = 1024;
  __device__ Waiter(const LaneLaunch& launch, const volatile int* blockFailed)
      : launch_(launch), blockFailed_(blockFailed), start_(globalTimerNs()) {}

  // The deadline bounds time without progress, not the launch: call this
  // whenever a piece has moved.
  __device__ void progressed() { start_ = globalTimerNs(); }

  // Call once per spin iteration; false means stop waiting (the reason is
  // recorded, or another thread of the block already failed).
  __device__ bool keepWaiting(int peer, bool receiving) {
    if (++spins_ % kCheckEvery != 0) return true;
    if (blockFailed_ != nullptr && *blockFailed_ != 0) return false;
    if (launch_.abortFlag != nullptr && *launch_.abortFlag != 0) {
      recordFailure(launch_.status, step::waitFailure(LaneStatus::Aborted, blockIdx.x, peer));
      return false;
    }
    if (launch_.timeoutNs != 0 && globalTimerNs() - start_ > launch_.timeoutNs) {
      step::LaneFailure f = step::waitFailure(LaneStatus::TimedOut, blockIdx.x, peer);
      f.detail = receiving ? 1 : 0;
      recordFailure(launch_.status, f);
      return false;
    }
    return true;
  }

 private:
  const LaneLaunch& launch_;
  const volatile int* blockFailed_;
  uint64_t start_;
  uint32_t spins_ = 0;
};

}  // namespace chorus::dev
