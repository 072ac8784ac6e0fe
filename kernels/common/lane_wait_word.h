// One lane's wait report for the GPU stall report (dev::LaneWaits in
// kernels/lane_plan.h) packed into a single 64-bit word. A lane's thread 0
// writes it into mapped host memory while the host's watchdog reads it; as
// three separate fields (time, peer, direction) a read could pair one
// update's peer with another's time and name the wrong rank. An aligned
// 8-byte store and load are single accesses on both sides, so a word is read
// either before or after an update, never half of each.
//
// Layout, high to low: peer + 1 (24 bits; 0 = the lane waits on nobody),
// receiving (1 bit), the %globaltimer value of the lane's last progress in
// units of 1024 ns (39 bits, wraps every 6.5 days; compare with
// laneWaitOlder, never with <). Ranks from 2^24 - 1 up are reported as
// "unknown" (kLaneWaitPeerUnknown), which the stall report prints as no peer.
#pragma once

#include <cstdint>

#include "kernels/common/compiler.h"

namespace chorus::step {

inline constexpr int kLaneWaitPeerBits = 24;
inline constexpr int kLaneWaitTimeBits = 39;
inline constexpr int kLaneWaitTimeShift = 10;  // ns -> units of 1024 ns
inline constexpr uint64_t kLaneWaitTimeMask = (uint64_t{1} << kLaneWaitTimeBits) - 1;
inline constexpr uint64_t kLaneWaitPeerMask = (uint64_t{1} << kLaneWaitPeerBits) - 1;
inline constexpr int32_t kLaneWaitPeerUnknown = -2;

struct LaneWait {
  int32_t peer = -1;        // -1: waits on nobody (never waited, or ended); kLaneWaitPeerUnknown: too large to say
  bool receiving = false;   // waits for data from the peer (else for room to send to it)
  uint64_t sinceUnits = 0;  // last progress, in units of 1024 ns, modulo 2^39
};

CHORUS_HD CHORUS_INLINE uint64_t packLaneWait(int32_t peer, bool receiving, uint64_t progressNs) {
  uint64_t peerField = 0;
  if (peer >= 0) {
    const auto p = static_cast<uint64_t>(peer) + 1;
    peerField = p < kLaneWaitPeerMask ? p : kLaneWaitPeerMask;
  }
  return (peerField << (kLaneWaitTimeBits + 1)) | (uint64_t{receiving ? 1u : 0u} << kLaneWaitTimeBits) |
         ((progressNs >> kLaneWaitTimeShift) & kLaneWaitTimeMask);
}

CHORUS_HD CHORUS_INLINE LaneWait unpackLaneWait(uint64_t word) {
  LaneWait w;
  const uint64_t peerField = word >> (kLaneWaitTimeBits + 1);
  w.peer = peerField == 0                   ? -1
           : peerField == kLaneWaitPeerMask ? kLaneWaitPeerUnknown
                                            : static_cast<int32_t>(peerField - 1);
  w.receiving = ((word >> kLaneWaitTimeBits) & 1) != 0;
  w.sinceUnits = word & kLaneWaitTimeMask;
  return w;
}

// Whether time a is before time b, across the 39-bit wrap (the lanes of one
// communicator report within days of each other, far less than half the range).
CHORUS_HD CHORUS_INLINE bool laneWaitOlder(uint64_t a, uint64_t b) {
  const uint64_t ahead = (b - a) & kLaneWaitTimeMask;
  return ahead != 0 && ahead < (uint64_t{1} << (kLaneWaitTimeBits - 1));
}

}  // namespace chorus::step
