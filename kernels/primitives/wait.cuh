// Bounded waiting on the device. Every spin loop in the kernels goes through
// a Waiter: it re-reads the abort flag, the clock and the verdict on the FIFO
// it waits on every kCheckEvery iterations and gives up (recording why, once
// per launch) when the flag is set, the deadline passes or a peer found that
// the ranks' calls differ, so a dead or stuck peer or a mismatched call stops
// the kernel instead of hanging the GPU. There, too, thread 0 tells the host
// since when its lane makes no progress (LaneWaits, for the stall report).
#pragma once

#include <cstdint>

#include "kernels/lane_plan.h"
#include "kernels/primitives/lane_failure.cuh"

namespace chorus::dev {

__device__ __forceinline__ uint64_t globalTimerNs() {
#if defined(CHORUS_KERNEL_SIM)  // the kernels on CPU threads (tests/kernel_sim/cuda_sim.h)
  return ::chorus::sim::clockNs();
#else
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

class Waiter {
 public:
  static constexpr uint32_t kCheckEvery = 1024;
  __device__ Waiter(const LaneParams& params, const volatile int* blockFailed)
      : params_(params), launch_(params.L), blockFailed_(blockFailed), start_(globalTimerNs()) {}

  // The deadline bounds time without progress, not the launch: call this
  // whenever a piece has moved.
  __device__ void progressed() { start_ = globalTimerNs(); }

  // Call once per spin iteration; false means stop waiting (the reason is
  // recorded, or another thread of the block already failed).
  __device__ bool keepWaiting(const DevFifo& fifo, bool receiving) {
    if (++spins_ % kCheckEvery != 0) return true;
    const int peer = fifo.peer;
    if (blockFailed_ != nullptr && *blockFailed_ != 0) return false;
    OpMismatchRecord verdict;
    if (readVerdict(fifo, &verdict)) {
      stopOnMismatch(params_, peer, verdict);
      return false;
    }
    publishWait(peer, receiving);
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

  // Thread 0 at the end of its lane: the lane no longer waits.
  __device__ void laneEnded() {
    progressed();
    publishWait(-1, false);
  }

 private:
  __device__ void publishWait(int peer, bool receiving) {
    if (threadIdx.x != 0 || launch_.waits == nullptr || start_ == published_) return;
    published_ = start_;
    // One aligned 8-byte store: the host reads all of it or none of it.
    volatile uint64_t* word = &launch_.waits->word[blockIdx.x];
    *word = step::packLaneWait(peer, receiving, start_);
  }

  const LaneParams& params_;
  const LaneLaunch& launch_;
  const volatile int* blockFailed_;
  uint64_t start_;
  uint64_t published_ = 0;
  uint32_t spins_ = 0;
};

}  // namespace chorus::dev
