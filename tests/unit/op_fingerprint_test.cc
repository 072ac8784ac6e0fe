// Operation fingerprints (src/core/op_fingerprint.h) and the step rule that
// judges them (step::printMatches), the message both executors print for an
// OpMismatch record, and the verdict a FIFO carries between its two ends.
#include "core/op_fingerprint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "kernels/common/step_rules.h"
#include "plan/lane_failure.h"
#include "transport/fifo.h"

namespace chorus {
namespace {

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

OpPrint allReduce(size_t count, ncclDataType_t t = ncclFloat32, ReduceKind k = ReduceKind::Sum, uint32_t seq = 17) {
  return makeOpPrint(CollType::AllReduce, count, t, k, 0, seq);
}

std::string text(const OpPrint& p) {
  char buf[128];
  describeOpPrint(p, buf, sizeof(buf));
  return buf;
}

// describeOpMismatch's text for a record.
std::string text(const OpMismatchRecord& r) {
  char out[400];
  describeOpMismatch(r, out, sizeof(out));
  return out;
}

TEST(OpFingerprint, DescribesEachShape) {
  EXPECT_EQ(text(allReduce(1000)), "AllReduce(1000 x float, sum)");
  EXPECT_EQ(text(allReduce(8, ncclInt32, ReduceKind::Max)), "AllReduce(8 x int32, max)");
  EXPECT_EQ(text(makeOpPrint(CollType::Broadcast, 5, ncclFloat64, ReduceKind::Max, 1, 1)),
            "Broadcast(5 x double, root 1)");
  EXPECT_EQ(text(makeOpPrint(CollType::Reduce, 5, ncclBfloat16, ReduceKind::SumPostDiv, 2, 1)),
            "Reduce(5 x bfloat16, avg, root 2)");
  EXPECT_EQ(text(makeOpPrint(CollType::Send, 1000, ncclFloat32, ReduceKind::Max, 3, 1)), "Send(1000 x float)");
  EXPECT_EQ(text(makeOpPrint(CollType::AllGather, 4, ncclUint8, ReduceKind::Max, 3, 1)), "AllGather(4 x uint8)");
}

TEST(OpFingerprint, NonReducingAndUnrootedFieldsAreNormalized) {
  // A Broadcast's op and an AllGather's root are not part of the call.
  const OpPrint a = makeOpPrint(CollType::Broadcast, 5, ncclFloat32, ReduceKind::Sum, 1, 1);
  const OpPrint b = makeOpPrint(CollType::Broadcast, 5, ncclFloat32, ReduceKind::Max, 1, 1);
  EXPECT_TRUE(step::printMatches(a, b));
  const OpPrint g0 = makeOpPrint(CollType::AllGather, 5, ncclFloat32, ReduceKind::Sum, 0, 1);
  const OpPrint g1 = makeOpPrint(CollType::AllGather, 5, ncclFloat32, ReduceKind::Sum, 1, 1);
  EXPECT_TRUE(step::printMatches(g0, g1));
}

TEST(OpFingerprint, MatchRuleComparesEveryField) {
  const OpPrint base = allReduce(1000);
  EXPECT_TRUE(step::printMatches(base, base));
  EXPECT_FALSE(step::printMatches(allReduce(2000), base));
  EXPECT_FALSE(step::printMatches(allReduce(1000, ncclInt32), base));  // same byte size, other type
  EXPECT_FALSE(step::printMatches(allReduce(1000, ncclFloat32, ReduceKind::Max), base));
  EXPECT_FALSE(step::printMatches(allReduce(1000, ncclFloat32, ReduceKind::Sum, 18), base));
  EXPECT_FALSE(step::printMatches(makeOpPrint(CollType::Broadcast, 1000, ncclFloat32, ReduceKind::Sum, 0, 17), base));
  const OpPrint r0 = makeOpPrint(CollType::Broadcast, 10, ncclFloat32, ReduceKind::Sum, 0, 3);
  const OpPrint r1 = makeOpPrint(CollType::Broadcast, 10, ncclFloat32, ReduceKind::Sum, 1, 3);
  EXPECT_FALSE(step::printMatches(r0, r1));
  // How the reduction travels (docs/wire.md) is part of the call.
  const OpPrint int8 = makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, 0, 17, 3, false);
  const OpPrint fp8 = makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, 0, 17, 2, false);
  const OpPrint exact = makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, 0, 17, 0, true);
  EXPECT_FALSE(step::printMatches(int8, fp8));
  EXPECT_FALSE(step::printMatches(int8, base));
  EXPECT_FALSE(step::printMatches(exact, base));
  EXPECT_TRUE(step::printMatches(int8, step::expectedFromPeer(int8)));
  EXPECT_EQ(text(int8), "AllReduce(1000 x float, sum, int8 wire)");
  EXPECT_EQ(text(exact), "AllReduce(1000 x float, sum, deterministic)");
  // A slot without a fingerprint is not judged.
  EXPECT_TRUE(step::printMatches(OpPrint{}, base));
}

TEST(OpFingerprint, ARecvExpectsTheMatchingSend) {
  const OpPrint recv = makeOpPrint(CollType::Recv, 1000, ncclFloat32, ReduceKind::Sum, 0, 3);
  const OpPrint send = makeOpPrint(CollType::Send, 1000, ncclFloat32, ReduceKind::Sum, 1, 3);
  EXPECT_FALSE(step::printMatches(send, recv));
  EXPECT_TRUE(step::printMatches(send, step::expectedFromPeer(recv)));
  const OpPrint other = makeOpPrint(CollType::Send, 2000, ncclFloat32, ReduceKind::Sum, 1, 3);
  EXPECT_FALSE(step::printMatches(other, step::expectedFromPeer(recv)));
  EXPECT_TRUE(step::printMatches(allReduce(5), step::expectedFromPeer(allReduce(5))));
}

TEST(OpFingerprint, CountersPerCommunicatorAndPerPeerDirection) {
  OpCounters c;
  EXPECT_EQ(c.next(CollType::AllReduce, 0), 1u);
  EXPECT_EQ(c.next(CollType::Broadcast, 2), 2u);  // a root is not a peer
  EXPECT_EQ(c.next(CollType::Send, 3), 1u);
  EXPECT_EQ(c.next(CollType::Send, 3), 2u);
  EXPECT_EQ(c.next(CollType::Recv, 3), 1u);
  EXPECT_EQ(c.next(CollType::Send, 1), 1u);
  EXPECT_EQ(c.next(CollType::AlltoAll, 0), 3u);
  EXPECT_EQ(c.collectives(), 3u);
  EXPECT_EQ(c.received(3), 1u);
  EXPECT_EQ(c.received(1), 0u);
  EXPECT_EQ(c.received(9), 0u);
}

std::string lane(const step::LaneFailure& f, int rank) {
  char msg[384];
  EXPECT_EQ(describeLaneFailure(f, rank, 0, msg, sizeof(msg)), ncclInvalidUsage);
  return msg;
}

TEST(OpFingerprint, MismatchMessageNamesBothCalls) {
  const step::LaneFailure f = step::opMismatch(0, 1, 0, allReduce(2000), allReduce(1000));
  EXPECT_EQ(f.status, static_cast<int32_t>(step::LaneStatus::OpMismatch));
  EXPECT_EQ(lane(f, 1),
            "op #17: rank 1 called AllReduce(2000 x float, sum), rank 0 called AllReduce(1000 x float, sum)");
  // The sender prints the receiver's record unchanged; a bystander says it stopped too.
  EXPECT_EQ(lane(f, 0), lane(f, 1));
  EXPECT_CONTAINS(lane(f, 2), "(rank 2 stopped too)");
}

TEST(OpFingerprint, MismatchMessageForAnotherOperationNumber) {
  const step::LaneFailure f =
      step::opMismatch(0, 0, 2, allReduce(1000), allReduce(1000, ncclFloat32, ReduceKind::Sum, 18));
  EXPECT_EQ(lane(f, 0),
            "op #17: rank 0 called AllReduce(1000 x float, sum), rank 2 called op #18 AllReduce(1000 x "
            "float, sum)");
}

TEST(OpFingerprint, MismatchMessageForPointToPoint) {
  const OpPrint recv = makeOpPrint(CollType::Recv, 2000, ncclFloat32, ReduceKind::Sum, 0, 3);
  const OpPrint send = makeOpPrint(CollType::Send, 1000, ncclFloat32, ReduceKind::Sum, 1, 3);
  EXPECT_EQ(lane(step::opMismatch(0, 1, 0, recv, send), 1),
            "send #3 from rank 0 to rank 1: rank 1 called Recv(2000 x float), rank 0 called Send(1000 x float)");
}

TEST(OpFingerprint, BothEndsOfAFifoLeaveTheSameVerdictBytes) {
  // Ranks 0 and 1 disagree on the count; each end finds it on the slot it received.
  const OpPrint call0 = allReduce(1000), call1 = allReduce(2000);
  const OpMismatchRecord by0 = step::canonicalMismatch(step::opMismatch(0, 0, 1, call0, call1).mismatch);
  const OpMismatchRecord by1 = step::canonicalMismatch(step::opMismatch(3, 1, 0, call1, call0).mismatch);
  EXPECT_EQ(std::memcmp(&by0, &by1, sizeof(by0)), 0);
  EXPECT_EQ(text(by1),
            "op #17: rank 0 called AllReduce(1000 x float, sum), rank 1 called AllReduce(2000 x float, sum)");
  // Point to point: the receiver's view turned around still names the right sender.
  const OpPrint recv = makeOpPrint(CollType::Recv, 2000, ncclFloat32, ReduceKind::Sum, 0, 3);
  const OpPrint send = makeOpPrint(CollType::Send, 1000, ncclFloat32, ReduceKind::Sum, 1, 3);
  EXPECT_EQ(text(step::canonicalMismatch(step::opMismatch(0, 1, 0, recv, send).mismatch)),
            "send #3 from rank 0 to rank 1: rank 0 called Send(1000 x float), rank 1 called Recv(2000 x float)");
}

TEST(OpFingerprint, RecordsWhoseTextDependsOnTheirOrientationKeepIt) {
  OpMismatchRecord unstamped = step::opMismatch(0, 1, 0, allReduce(8), OpPrint{}).mismatch;
  OpMismatchRecord cycle = step::opMismatch(0, 1, 0, allReduce(8), allReduce(16)).mismatch;
  cycle.mine.pad = kWaitCycleMark;
  for (const OpMismatchRecord& r : {unstamped, cycle}) {
    const OpMismatchRecord c = step::canonicalMismatch(r);
    EXPECT_EQ(std::memcmp(&c, &r, sizeof(r)), 0) << text(r);
  }
}

TEST(OpFingerprint, FifoCarriesPrintsAndOneVerdict) {
  const uint32_t slotBytes = 4096, nslots = 4;
  auto mem =
      std::shared_ptr<void>(::operator new(fifoTotalBytes(slotBytes, nslots)), [](void* p) { ::operator delete(p); });
  fifoInit(mem.get(), slotBytes, nslots, 0);
  FifoEnd end;
  end.ctl = static_cast<FifoControl*>(mem.get());
  end.slots = static_cast<char*>(mem.get()) + fifoControlBytes();
  end.slotBytes = slotBytes;
  end.nslots = nslots;
  SendConnector send(end);
  RecvConnector recv(end);
  ASSERT_TRUE(send.ready());
  send.post(64, allReduce(16));
  ASSERT_TRUE(recv.ready());
  EXPECT_EQ(recv.size(), 64u);
  EXPECT_TRUE(step::printMatches(recv.print(), allReduce(16)));
  EXPECT_FALSE(step::printMatches(recv.print(), allReduce(32)));
  OpMismatchRecord r;
  EXPECT_FALSE(fifoMismatch(end.ctl, &r));
  OpMismatchRecord first;
  first.rank = 1;
  first.peer = 0;
  first.mine = allReduce(32);
  fifoSetMismatch(end.ctl, first);
  OpMismatchRecord second = first;
  second.rank = 7;
  fifoSetMismatch(end.ctl, second);  // first verdict wins
  ASSERT_TRUE(fifoMismatch(end.ctl, &r));
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.mine.count, 32u);
}

// A receiver's intent (FifoControl::intent): none until set, then the latest
// print; a reader never takes one while the writer is between its halves.
TEST(OpFingerprint, FifoCarriesTheReceiversIntent) {
  auto mem = std::shared_ptr<void>(::operator new(fifoTotalBytes(4096, 2)), [](void* p) { ::operator delete(p); });
  fifoInit(mem.get(), 4096, 2, 0);
  auto* ctl = static_cast<FifoControl*>(mem.get());
  OpPrint got;
  EXPECT_FALSE(fifoIntent(ctl, &got));
  fifoSetIntent(ctl, allReduce(16));
  fifoSetIntent(ctl, allReduce(32));
  ASSERT_TRUE(fifoIntent(ctl, &got));
  EXPECT_EQ(got.count, 32u);
  EXPECT_TRUE(step::printMatches(got, allReduce(32)));
  ctl->intent.version.fetch_add(1);  // as if a write were under way
  EXPECT_FALSE(fifoIntent(ctl, &got));
}

// A send in a cycle of sends names its own target in `root` (plan/setup_notes.cc).
TEST(OpFingerprint, MismatchMessageForACycleOfSends) {
  OpMismatchRecord r;
  r.mine = makeOpPrint(CollType::Send, 1000, ncclFloat32, ReduceKind::Sum, 0, 1);
  r.theirs = r.mine;
  r.theirs.root = 1;
  r.rank = 2;
  r.peer = 0;
  EXPECT_EQ(text(r),
            "send #1 from rank 2 to rank 0: rank 2 called Send(1000 x float), rank 0 called send #1 from rank 0 to "
            "rank 1 Send(1000 x float)");
}

// A cycle of waits through point-to-point calls (wait chains,
// plan/setup_notes.cc): each print names its task's peer in `root`.
TEST(OpFingerprint, MismatchMessageForACycleOfWaits) {
  OpMismatchRecord r;
  r.mine = makeOpPrint(CollType::Recv, 1000, ncclFloat32, ReduceKind::Sum, 0, 2);
  r.mine.root = 0;
  r.mine.pad = kWaitCycleMark;
  r.theirs = makeOpPrint(CollType::Recv, 1000, ncclFloat32, ReduceKind::Sum, 0, 2);
  r.theirs.root = 1;
  r.rank = 1;
  r.peer = 2;
  EXPECT_EQ(text(r),
            "deadlock: rank 1 called Recv(1000 x float) #2 from rank 0, rank 2 called Recv(1000 x float) #2 from "
            "rank 1, and every rank of the cycle waits for the next (a send and a receive that must run together "
            "belong in one ncclGroupStart/ncclGroupEnd)");
  // The mark only changes the text of point-to-point prints.
  r.mine = makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, 0, 2);
  r.mine.pad = kWaitCycleMark;
  EXPECT_EQ(text(r).find("deadlock"), std::string::npos) << text(r);
}

}  // namespace
}  // namespace chorus
