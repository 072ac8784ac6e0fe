// The host executor's learned spin budget (src/host/spin_budget.h): spin
// while peers answer from other CPUs, yield at once when the answers come
// from a peer that shares this thread's CPU.
#include "host/spin_budget.h"

#include <gtest/gtest.h>

#include <limits>

namespace {

using chorus::SpinBudget;
using std::chrono::microseconds;

TEST(SpinBudget, StartsAtTheConfiguredBudget) {
  SpinBudget b(500);
  EXPECT_EQ(b.polls(), 500);
  b.setCeiling(100);  // a communicator with a smaller CHORUS_SPIN_COUNT
  EXPECT_EQ(b.polls(), 100);
}

TEST(SpinBudget, AShortHandOverToAnotherTaskStopsSpinning) {
  SpinBudget b(500);
  b.answeredAfterYield(/*switched=*/true, microseconds(5));
  EXPECT_EQ(b.polls(), 0);
}

TEST(SpinBudget, AnotherProgramsTimeSliceTeachesNothing) {
  SpinBudget b(500);
  b.answeredAfterYield(true, SpinBudget::kPeerHandoff * 10);
  EXPECT_EQ(b.polls(), 500);
}

TEST(SpinBudget, AnswersFromAnotherCpuGrowItBackToTheCeiling) {
  SpinBudget b(500);
  b.answeredAfterYield(true, microseconds(5));
  ASSERT_EQ(b.polls(), 0);
  b.answeredAfterYield(/*switched=*/false, microseconds(1));  // nobody else ran: the peer is elsewhere
  EXPECT_EQ(b.polls(), SpinBudget::kRegrowFrom);
  b.answeredWhileSpinning();
  EXPECT_EQ(b.polls(), 2 * SpinBudget::kRegrowFrom);
  for (int i = 0; i < 10; ++i) b.answeredWhileSpinning();
  EXPECT_EQ(b.polls(), 500);
}

TEST(SpinBudget, ARaisedCeilingIsReachedByGrowing) {
  SpinBudget b(std::numeric_limits<int64_t>::max());  // a thread's first call: nothing learned
  b.setCeiling(100);
  EXPECT_EQ(b.polls(), 100);
  b.setCeiling(400);
  EXPECT_EQ(b.polls(), 100);
  b.answeredWhileSpinning();
  b.answeredWhileSpinning();
  EXPECT_EQ(b.polls(), 400);
}

TEST(SpinBudget, ZeroCeilingNeverSpins) {
  SpinBudget b(0);
  b.answeredWhileSpinning();
  b.answeredAfterYield(false, microseconds(1));
  EXPECT_EQ(b.polls(), 0);
}

}  // namespace
