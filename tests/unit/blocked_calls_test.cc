// Calls blocked on each other (src/plan/blocked_calls.h): which task of a
// call cannot complete before a peer numbers an operation it has not
// numbered yet. Two calls with such a task each are a deadlock; a late rank
// (whose counters show it numbered what is needed, or whose call needs
// nothing from this rank) never is.
#include "plan/blocked_calls.h"

#include <gtest/gtest.h>

#include <vector>

namespace chorus {
namespace {

CallTask task(CollType c, uint32_t seq, int peerOrRoot, size_t count = 1000) {
  const bool p2p = c == CollType::Send || c == CollType::Recv;
  return CallTask{makeOpPrint(c, count, ncclFloat32, ReduceKind::Sum, peerOrRoot, seq), p2p ? peerOrRoot : -1};
}

PeerCounts counts(uint32_t collectives, uint32_t sends, uint32_t receives) { return {collectives, sends, receives}; }

TEST(BlockedCalls, SendNeedsThePeersReceiveOfItsNumber) {
  const CallTask send = task(CollType::Send, 2, 1);
  EXPECT_TRUE(needsUnnumbered(send, 0, 1, counts(0, 0, 1)));
  EXPECT_FALSE(needsUnnumbered(send, 0, 1, counts(0, 0, 2)));  // rank 1 numbered its receive #2 from rank 0
  EXPECT_FALSE(needsUnnumbered(send, 0, 2, counts(0, 0, 0)));  // another peer
  EXPECT_FALSE(needsUnnumbered(task(CollType::Send, 2, 1, 0), 0, 1, counts(0, 0, 0)));  // empty
}

TEST(BlockedCalls, RecvNeedsThePeersSendOfItsNumber) {
  const CallTask recv = task(CollType::Recv, 1, 0);
  EXPECT_TRUE(needsUnnumbered(recv, 1, 0, counts(5, 0, 3)));
  EXPECT_FALSE(needsUnnumbered(recv, 1, 0, counts(0, 1, 0)));
}

TEST(BlockedCalls, AllReduceNeedsEveryRanksCollective) {
  const CallTask ar = task(CollType::AllReduce, 3, 0);
  EXPECT_TRUE(needsUnnumbered(ar, 0, 2, counts(2, 9, 9)));
  EXPECT_FALSE(needsUnnumbered(ar, 0, 2, counts(3, 0, 0)));
  EXPECT_FALSE(needsUnnumbered(task(CollType::AllReduce, 3, 0, 0), 0, 2, counts(0, 0, 0)));
}

// Only direct exchanges with the root count: a broadcast root's or a reduce
// sender's wait for ranks further along the tree is not relied on.
TEST(BlockedCalls, RootedCollectivesNeedTheirRootOrEveryRankAtTheRoot) {
  const PeerCounts none = counts(0, 0, 0);
  EXPECT_TRUE(needsUnnumbered(task(CollType::Broadcast, 1, 0), 1, 0, none));
  EXPECT_FALSE(needsUnnumbered(task(CollType::Broadcast, 1, 0), 1, 2, none));
  EXPECT_FALSE(needsUnnumbered(task(CollType::Broadcast, 1, 0), 0, 1, none));
  EXPECT_TRUE(needsUnnumbered(task(CollType::Reduce, 1, 0), 0, 2, none));
  EXPECT_FALSE(needsUnnumbered(task(CollType::Reduce, 1, 0), 2, 0, none));
  EXPECT_TRUE(needsUnnumbered(task(CollType::Gather, 1, 2), 2, 0, none));
  EXPECT_TRUE(needsUnnumbered(task(CollType::Gather, 1, 2), 0, 2, none));
  EXPECT_FALSE(needsUnnumbered(task(CollType::Gather, 1, 2), 0, 1, none));
  EXPECT_TRUE(needsUnnumbered(task(CollType::Scatter, 1, 0), 0, 1, none));
  EXPECT_TRUE(needsUnnumbered(task(CollType::Scatter, 1, 0), 1, 0, none));
  EXPECT_FALSE(needsUnnumbered(task(CollType::Scatter, 1, 0), 1, 2, none));
}

// Rank 0 waits in AllReduce #1 for rank 1, which skipped it and waits in
// its Recv #1 from rank 0: each call needs an operation the other has not
// numbered.
TEST(BlockedCalls, SkippedCollectiveBeforeASendIsADeadlock) {
  const std::vector<CallTask> rank0 = {task(CollType::AllReduce, 1, 0)};
  const std::vector<CallTask> rank1 = {task(CollType::Recv, 1, 0)};
  EXPECT_EQ(firstUnmetNeed(rank0, 0, 1, counts(0, 0, 1)), 0);
  EXPECT_EQ(firstUnmetNeed(rank1, 1, 0, counts(1, 0, 0)), 0);
}

// The chain of SetupNotes.LateRankInAChainOfSends*: rank 1 sends to rank 2
// and reads rank 0's note (a send to rank 1). Rank 0's call needs rank 1,
// but rank 1's call needs nothing from rank 0: no deadlock between them.
TEST(BlockedCalls, ARankThatNeedsNothingFromThePeerIsNotBlockedByIt) {
  const std::vector<CallTask> rank0 = {task(CollType::Send, 1, 1)};
  const std::vector<CallTask> rank1 = {task(CollType::Send, 1, 2)};
  EXPECT_EQ(firstUnmetNeed(rank0, 0, 1, counts(0, 1, 0)), 0);
  EXPECT_EQ(firstUnmetNeed(rank1, 1, 0, counts(0, 1, 0)), -1);
}

// A group's tasks are searched in order; the first unmet need is named.
TEST(BlockedCalls, NamesTheFirstTaskThatWaits) {
  const std::vector<CallTask> group = {task(CollType::Send, 1, 2), task(CollType::Recv, 4, 1),
                                       task(CollType::AllReduce, 2, 0)};
  EXPECT_EQ(firstUnmetNeed(group, 0, 1, counts(1, 3, 0)), 1);
  EXPECT_EQ(firstUnmetNeed(group, 0, 1, counts(1, 4, 0)), 2);
  EXPECT_EQ(firstUnmetNeed(group, 0, 1, counts(2, 4, 0)), -1);
}

}  // namespace
}  // namespace chorus
