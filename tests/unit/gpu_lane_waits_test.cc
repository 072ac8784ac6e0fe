// The GPU stall report's reading of what the lanes wait on (src/gpu/lane_waits.h):
// lanes a launch never used must not count as a wait on rank 0, the lane
// that has waited longest names the peer, and each lane's report is one
// packed word (kernels/common/lane_wait_word.h) whose peer and time come
// from the same update.
#include <gtest/gtest.h>

#include <cstdint>

#include "gpu/lane_waits.h"

namespace chorus::gpu {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

TEST(LaneWaits, ClearedLanesWaitOnNobody) {
  dev::LaneWaits w{};
  w.word[5] = step::packLaneWait(3, false, uint64_t{77} * 1024);
  clearLaneWaits(&w);
  EXPECT_EQ(longestWait(w).peer, -1);
}

// Mapped memory starts zeroed: a lane that never ran reads as word 0. One
// real wait among them must still name its own peer, not rank 0.
TEST(LaneWaits, UnusedZeroedLanesDoNotNameRankZero) {
  dev::LaneWaits w{};
  EXPECT_EQ(step::unpackLaneWait(0).peer, -1);
  w.word[2] = step::packLaneWait(1, true, 5 * kSecond);
  const LongestWait longest = longestWait(w);
  EXPECT_EQ(longest.peer, 1);
  EXPECT_TRUE(longest.receiving);
}

TEST(LaneWaits, TheOldestWaitNamesThePeerAndEndedLanesDoNot) {
  dev::LaneWaits w{};
  clearLaneWaits(&w);
  w.word[0] = step::packLaneWait(2, false, 900 * kSecond);
  w.word[1] = step::packLaneWait(4, true, 300 * kSecond);
  w.word[7] = step::packLaneWait(-1, false, 100 * kSecond);  // ended first: waits on nobody
  const LongestWait longest = longestWait(w);
  EXPECT_EQ(longest.peer, 4);
  EXPECT_TRUE(longest.receiving);
  w.word[1] = step::packLaneWait(-1, false, 950 * kSecond);  // that lane ends
  EXPECT_EQ(longestWait(w).peer, 2);
  EXPECT_FALSE(longestWait(w).receiving);
}

TEST(LaneWaits, AWordCarriesPeerDirectionAndTimeOfOneUpdate) {
  for (const int32_t peer : {0, 1, 7, 4095, (1 << 24) - 3}) {
    for (const bool receiving : {false, true}) {
      const uint64_t ns = 123'456'789'012'345ull;
      const step::LaneWait got = step::unpackLaneWait(step::packLaneWait(peer, receiving, ns));
      EXPECT_EQ(got.peer, peer);
      EXPECT_EQ(got.receiving, receiving);
      EXPECT_EQ(got.sinceUnits, (ns >> step::kLaneWaitTimeShift) & step::kLaneWaitTimeMask);
    }
  }
  // Progress a few microseconds later changes the word: the watchdog sees it.
  EXPECT_NE(step::packLaneWait(3, true, 10 * kSecond), step::packLaneWait(3, true, 10 * kSecond + 4096));
}

TEST(LaneWaits, PeersTooLargeToPackAreReportedAsUnknownNotAsAnotherRank) {
  for (const int32_t peer : {(1 << 24) - 2, 1 << 24, INT32_MAX}) {
    EXPECT_EQ(step::unpackLaneWait(step::packLaneWait(peer, true, kSecond)).peer, step::kLaneWaitPeerUnknown) << peer;
  }
  dev::LaneWaits w{};
  clearLaneWaits(&w);
  w.word[0] = step::packLaneWait(INT32_MAX, true, kSecond);
  w.word[1] = step::packLaneWait(6, false, 2 * kSecond);
  EXPECT_EQ(longestWait(w).peer, -1);  // the oldest wait's peer cannot be named; not rank 6
}

// The 39-bit time wraps every 6.5 days: a lane that started just before the
// wrap is still the oldest.
TEST(LaneWaits, TheOldestWaitIsFoundAcrossTheTimeWrap) {
  const uint64_t wrapNs = (uint64_t{1} << (step::kLaneWaitTimeBits + step::kLaneWaitTimeShift));
  dev::LaneWaits w{};
  clearLaneWaits(&w);
  w.word[0] = step::packLaneWait(5, false, wrapNs + 2 * kSecond);  // packs small
  w.word[1] = step::packLaneWait(9, true, wrapNs - kSecond);       // packs near the top
  EXPECT_EQ(longestWait(w).peer, 9);
  EXPECT_TRUE(step::laneWaitOlder(10, 20));
  EXPECT_FALSE(step::laneWaitOlder(20, 10));
  EXPECT_FALSE(step::laneWaitOlder(20, 20));
  EXPECT_TRUE(step::laneWaitOlder(step::kLaneWaitTimeMask - 5, 3));
}

}  // namespace
}  // namespace chorus::gpu
