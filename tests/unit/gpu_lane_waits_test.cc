// The GPU stall report's reading of what the lanes wait on (src/gpu/lane_waits.h):
// lanes a launch never used must not count as a wait on rank 0, and the lane
// that has waited longest names the peer.
#include <gtest/gtest.h>

#include "gpu/lane_waits.h"

namespace chorus::gpu {
namespace {

TEST(LaneWaits, ClearedLanesWaitOnNobody) {
  dev::LaneWaits w{};
  w.peer[5] = 3;
  w.progressNs[5] = 77;
  clearLaneWaits(&w);
  EXPECT_EQ(longestWait(w).peer, -1);
}

// Mapped memory starts zeroed: a lane that never ran reads {0 ns, peer 0}.
// One real wait among them must still name its own peer, not rank 0.
TEST(LaneWaits, UnusedZeroedLanesDoNotNameRankZero) {
  dev::LaneWaits w{};
  w.peer[2] = 1;
  w.receiving[2] = 1;
  w.progressNs[2] = 5'000'000'000ull;
  const LongestWait longest = longestWait(w);
  EXPECT_EQ(longest.peer, 1);
  EXPECT_TRUE(longest.receiving);
}

TEST(LaneWaits, TheOldestWaitNamesThePeerAndEndedLanesDoNot) {
  dev::LaneWaits w{};
  clearLaneWaits(&w);
  w.peer[0] = 2, w.progressNs[0] = 900;
  w.peer[1] = 4, w.progressNs[1] = 300, w.receiving[1] = 1;
  w.peer[7] = -1, w.progressNs[7] = 100;  // ended first: waits on nobody
  const LongestWait longest = longestWait(w);
  EXPECT_EQ(longest.peer, 4);
  EXPECT_TRUE(longest.receiving);
  w.peer[1] = -1;  // that lane ends
  EXPECT_EQ(longestWait(w).peer, 2);
  EXPECT_FALSE(longestWait(w).receiving);
}

}  // namespace
}  // namespace chorus::gpu
