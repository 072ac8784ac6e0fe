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
  for (uint64_t& word : w->word) word = step::packLaneWait(-1, false, 0);
}

struct LongestWait {
  int peer = -1;  // -1: no lane waits, or the longest-waiting one's peer is too large to report
  bool receiving = false;
};

// The lane that has waited longest (the oldest start among lanes that wait
// on a peer and have published a start) names the peer. Each lane's word is
// read once: its peer and time belong to the same update.
inline LongestWait longestWait(const volatile dev::LaneWaits& w) {
  LongestWait longest;
  bool found = false;
  uint64_t oldest = 0;
  for (const volatile uint64_t& word : w.word) {
    const step::LaneWait lane = step::unpackLaneWait(word);
    if (lane.peer == -1 || lane.sinceUnits == 0) continue;
    if (found && !step::laneWaitOlder(lane.sinceUnits, oldest)) continue;
    found = true;
    oldest = lane.sinceUnits;
    longest.peer = lane.peer >= 0 ? lane.peer : -1;
    longest.receiving = lane.receiving;
  }
  return longest;
}

}  // namespace chorus::gpu
