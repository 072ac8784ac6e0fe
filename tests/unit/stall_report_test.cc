// The stall report's pure parts: the note's encoding, rank lists and the
// line (core/stall_report.h), and the activity record's GPU-mode view
// (core/op_activity.h: a returned call whose kernels make no progress).
#include "core/stall_report.h"

#include <gtest/gtest.h>

#include "core/op_activity.h"

namespace chorus {
namespace {

StallNote waiting(int rank, uint64_t op, int64_t ms, int peer = -1) {
  StallNote n;
  n.rank = rank;
  n.inCall = true;
  n.collective = op;
  n.collDone = op - 1;
  n.waitedMs = ms;
  n.waitedPeer = peer;
  n.receiving = true;
  return n;
}

TEST(StallNote, RoundTripsAndRejectsOtherBytes) {
  StallNote n = waiting(5, 1043, 63000, 3);
  StallNote back;
  ASSERT_TRUE(decodeStallNote(encodeStallNote(n), &back));
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.collective, 1043u);
  EXPECT_EQ(back.collDone, 1042u);
  EXPECT_EQ(back.waitedMs, 63000);
  EXPECT_EQ(back.waitedPeer, 3);
  EXPECT_TRUE(back.inCall);
  EXPECT_TRUE(back.receiving);
  std::vector<uint8_t> bytes = encodeStallNote(n);
  bytes[0] ^= 1;
  EXPECT_FALSE(decodeStallNote(bytes, &back));
  EXPECT_FALSE(decodeStallNote(std::vector<uint8_t>(12, 0), &back));
  bytes = encodeStallNote(n);
  bytes[38] = 7;
  EXPECT_FALSE(decodeStallNote(bytes, &back));
}

TEST(StallLine, RankLists) {
  EXPECT_EQ(formatRankList({0, 1, 2, 4, 5, 6, 7}), "0-2,4-7");
  EXPECT_EQ(formatRankList({0, 1}), "0,1");
  EXPECT_EQ(formatRankList({3}), "3");
  EXPECT_EQ(formatRankList({0, 2, 3, 9}), "0,2,3,9");
  EXPECT_EQ(formatRankList({}), "");
}

TEST(StallLine, NamesTheRankThatHasNotCalled) {
  StallPicture p;
  p.nranks = 8;
  p.self = waiting(0, 1043, 61000, 7);
  p.call = "AllReduce(2097152 x bfloat16, sum)";
  for (int r : {1, 2, 5, 6, 7}) p.peers[r] = waiting(r, 1043, 60000 + r * 300, r - 1);
  p.peers[4] = waiting(4, 1043, 63000, 3);
  EXPECT_EQ(formatStallLine(p),
            "op #1043 AllReduce(2097152 x bfloat16, sum): ranks 0-2,4-7 waiting (up to 63 s, rank 4 on rank 3); "
            "rank 3 has not called it (no note from it; this rank completed op #1042)");
}

TEST(StallLine, RanksInOtherCalls) {
  StallPicture p;
  p.nranks = 3;
  p.self = waiting(1, 7, 5000, 0);
  p.call = "Broadcast(10 x int8, root 0)";
  p.peers[0] = waiting(0, 6, 9000, 2);
  StallNote idle;
  idle.rank = 2;
  idle.collDone = 6;
  p.peers[2] = idle;
  EXPECT_EQ(formatStallLine(p),
            "op #7 Broadcast(10 x int8, root 0): rank 1 waiting (up to 5 s); rank 0 is in op #6 (no progress for 9 s); "
            "rank 2 is in no call (completed op #6)");
}

TEST(StallLine, DescribesAbsentRanksFromTheirAnswers) {
  StallPicture p;
  p.nranks = 8;
  p.self = waiting(0, 1043, 63000, 3);
  p.call = "AllReduce(2097152 x bfloat16, sum)";
  for (int r : {1, 2, 4, 5}) p.peers[r] = waiting(r, 1043, 62000, r - 1);
  PeerAnswer idle{PeerAnswer::kAnswered, {3, false, 1042, 1042, 63400}, ""};
  p.asked[3] = idle;
  p.asked[6] = PeerAnswer{PeerAnswer::kGone, {}, "cannot reach its mailbox"};
  p.asked[7] = PeerAnswer{PeerAnswer::kNoAnswer, {}, "timed out"};
  EXPECT_EQ(formatStallLine(p),
            "op #1043 AllReduce(2097152 x bfloat16, sum): ranks 0-2,4,5 waiting (up to 63 s, rank 0 on rank 3); "
            "rank 3 last completed op #1042 and has not called since 63 s; rank 6 is gone (cannot reach its "
            "mailbox); rank 7 has not called it (no note from it; this rank completed op #1042)");
}

TEST(RankStatus, RoundTripsAndRejectsOtherBytes) {
  const RankStatus s{3, true, 1043, 1042, 63400};
  RankStatus back;
  ASSERT_TRUE(decodeRankStatus(encodeRankStatus(s), &back));
  EXPECT_EQ(back.rank, 3);
  EXPECT_TRUE(back.inCall);
  EXPECT_EQ(back.collStarted, 1043u);
  EXPECT_EQ(back.collDone, 1042u);
  EXPECT_EQ(back.sinceLastCallMs, 63400);
  EXPECT_FALSE(decodeRankStatus(encodeStallNote(waiting(3, 1, 1)), &back));
  std::vector<uint8_t> bytes = encodeRankStatus(s);
  bytes[12] = 2;
  EXPECT_FALSE(decodeRankStatus(bytes, &back));
}

// GPU mode: the call has returned (completed as far as the host thread is
// concerned); while the watchdog marks its kernels as waiting, snapshots show
// it in flight and not completed, with the waited peer; cleared, as before.
TEST(OpActivity, DeviceWaitingShowsTheReturnedCallInFlight) {
  OpActivity a;
  a.begin(makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, 0, 1), 1, 1);
  a.end();
  a.begin(makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, 0, 2), 1, 1);
  a.end();
  OpActivity::Snapshot s = a.snapshot();
  EXPECT_FALSE(s.inCall);
  EXPECT_EQ(s.collDone, 2u);
  a.setDeviceWaiting(12345, 1, true);
  s = a.snapshot();
  EXPECT_TRUE(s.inCall);
  EXPECT_EQ(s.collStarted, 2u);
  EXPECT_EQ(s.collDone, 1u);
  EXPECT_EQ(s.call.seq, 2u);
  EXPECT_EQ(s.waitingSinceUnixMs, 12345);
  EXPECT_EQ(s.waitedPeer, 1);
  EXPECT_TRUE(s.waitedReceiving);
  a.setDeviceWaiting(0, -1, false);
  s = a.snapshot();
  EXPECT_FALSE(s.inCall);
  EXPECT_EQ(s.collDone, 2u);
}

}  // namespace
}  // namespace chorus
