// What the lanes of a GPU-mode communicator wait on, as the kernels report
// it in mapped memory (dev::LaneWaits): read by the watchdog's stall report.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/lane_plan.h"

namespace chorus::gpu {

// A lane that has never waited: what setup writes, so that lanes a launch
// does not use never look like a wait on rank 0.
inline void clearLaneWaits(dev::LaneWaits* w) {
  constexpr size_t kLanes = sizeof(w->peer) / sizeof(w->peer[0]);
  for (size_t i = 0; i < kLanes; ++i) {
    w->progressNs[i] = 0;
    w->peer[i] = -1;
    w->receiving[i] = 0;
  }
}

struct LongestWait {
  int peer = -1;  // -1: no lane waits
  bool receiving = false;
};

// The lane that has waited longest (the oldest start among lanes that name a
// peer and have published a start) names the peer.
inline LongestWait longestWait(const volatile dev::LaneWaits& w) {
  constexpr size_t kLanes = sizeof(w.peer) / sizeof(w.peer[0]);
  LongestWait longest;
  uint64_t oldest = UINT64_MAX;
  for (size_t i = 0; i < kLanes; ++i) {
    const uint64_t at = w.progressNs[i];
    if (w.peer[i] < 0 || at == 0 || at >= oldest) continue;
    oldest = at;
    longest.peer = w.peer[i];
    longest.receiving = w.receiving[i] != 0;
  }
  return longest;
}

}  // namespace chorus::gpu
