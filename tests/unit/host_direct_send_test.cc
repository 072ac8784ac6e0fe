// Zero-copy sends in the host executor (kernels/common/direct_slot.h), driven
// step by step over a hand-built FIFO: the sender posts one descriptor and
// finishes only after the receiver copied its buffer; a connector whose
// receiver cannot read the sender's memory falls back to pieces; and a
// descriptor that does not match the receiver's step is an error, not a
// silent partial copy.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/result.h"
#include "host/executor.h"
#include "unit/host_fifo_util.h"

namespace chorus {
namespace {

using namespace chorus::test;

constexpr uint32_t kSlot = 4096;

sched::Segment single(const void* src, void* dst, size_t count) {
  sched::Segment s;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.flags = static_cast<uint8_t>((src ? sched::kSegHasSrc : 0) | (dst ? sched::kSegHasDst : 0));
  return s;
}

// A sending plan and a receiving plan of one lane each, over one FIFO.
struct Pair {
  Plan sendPlan, recvPlan;
  std::vector<float> src, dst;
  Pair(size_t sendCount, size_t recvCount) : src(sendCount), dst(recvCount, -1.0f) {
    for (Plan* plan : {&sendPlan, &recvPlan}) {
      plan->tasks.resize(1);
      plan->tasks[0].spec = ReduceSpec{ncclFloat32, ReduceKind::Sum, nullptr, 1};
      plan->lanes.resize(1);
      plan->lanes[0].pieceBytes = kSlot;
    }
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f + 1.0f;
  }
  Lane& sender() { return sendPlan.lanes[0]; }
  Lane& receiver() { return recvPlan.lanes[0]; }
  bool send(ncclResult_t* err) { return progressLane(sendPlan, sender(), err); }
  bool recv(ncclResult_t* err) { return progressLane(recvPlan, receiver(), err); }
  void wire(HostFifo& f, bool direct) {
    sendPlan.conns = {ConnRef{nullptr, f.send.get()}};
    recvPlan.conns = {ConnRef{f.recv.get(), nullptr}};
    sched::Segment out = single(src.data(), nullptr, src.size());
    out.conn[2] = 0;
    if (direct) out.flags |= sched::kSegDirect;
    sched::Segment in = single(nullptr, dst.data(), dst.size());
    in.conn[0] = 0;
    sender().segments = {out};
    receiver().segments = {in};
  }
};

// Moves the sender's lane once (posting its next slot), then lets the
// receiver take it: the receiver must refuse with ncclInvalidUsage. Returns
// the error message.
std::string receiverRefuses(Pair& p) {
  ncclResult_t err = ncclSuccess;
  EXPECT_TRUE(p.send(&err));
  EXPECT_FALSE(p.recv(&err));
  EXPECT_EQ(err, ncclInvalidUsage);
  return lastErrorMessage();
}

TEST(HostDirectSend, OneDescriptorAndTheSenderWaitsForTheReader) {
  HostFifo f(kSlot, 4, 0, 1, /*peerReads=*/true);
  Pair p(100000, 100000);  // 400 KB: 98 pieces through the FIFO, one descriptor zero-copy
  p.wire(f, true);
  ncclResult_t err = ncclSuccess;
  EXPECT_TRUE(p.send(&err));
  EXPECT_EQ(f.posted(), 1u);
  EXPECT_FALSE(p.send(&err)) << "the sender must wait until the receiver has read its buffer";
  EXPECT_FALSE(p.sender().finished());
  EXPECT_TRUE(p.recv(&err));
  EXPECT_TRUE(p.receiver().finished() || !p.recv(&err));
  EXPECT_EQ(f.freed(), 1u);
  EXPECT_EQ(p.dst, p.src);
  EXPECT_TRUE(p.send(&err));
  EXPECT_FALSE(p.send(&err));
  EXPECT_TRUE(p.sender().finished());
  EXPECT_EQ(err, ncclSuccess);
  EXPECT_EQ(f.posted(), 1u) << "a zero-copy send moves no data through the FIFO";
}

TEST(HostDirectSend, ReceiverThatCannotReadUsesPieces) {
  HostFifo f(kSlot, 4, 0, 1, /*peerReads=*/false);
  Pair p(10000, 10000);
  p.wire(f, true);
  ncclResult_t err = ncclSuccess;
  for (int guard = 0; guard < 100000 && !(p.sender().finished() && p.receiver().finished()); ++guard) {
    p.send(&err);
    p.recv(&err);
    ASSERT_EQ(err, ncclSuccess);
  }
  EXPECT_EQ(p.dst, p.src);
  EXPECT_EQ(f.posted(), (10000 * sizeof(float) + kSlot - 1) / kSlot);
}

TEST(HostDirectSend, CountMismatchIsAnErrorNamingThePeer) {
  HostFifo f(kSlot, 4, 3, 1, /*peerReads=*/true);
  Pair p(1000, 999);
  p.wire(f, true);
  const std::string msg = receiverRefuses(p);
  EXPECT_NE(msg.find("rank 3 sent 4000 bytes zero-copy where 3996 were expected"), std::string::npos) << msg;
  EXPECT_EQ(p.dst, std::vector<float>(999, -1.0f)) << "nothing may be copied on a mismatch";
}

TEST(HostDirectSend, DescriptorIntoAReducingStepIsAnError) {
  HostFifo f(kSlot, 4, 2, 1, /*peerReads=*/true);
  Pair p(500, 500);
  p.wire(f, true);
  std::vector<float> local(500, 2.0f);
  // recv + reduce with a local input
  p.receiver().segments[0].src = local.data();
  p.receiver().segments[0].flags |= sched::kSegHasSrc;
  const std::string msg = receiverRefuses(p);
  EXPECT_NE(msg.find("also sends or reduces"), std::string::npos) << msg;
}

TEST(HostDirectSend, TheReadersProgressCountsAsTheSendersProgress) {
  HostFifo f(kSlot, 4, 0, 1, /*peerReads=*/true);
  Pair p(1000, 1000);
  p.wire(f, true);
  ncclResult_t err = ncclSuccess;
  ASSERT_TRUE(p.send(&err));
  EXPECT_FALSE(p.send(&err));
  // A reader halfway through a long copy publishes how far it got.
  auto* d = reinterpret_cast<DirectDescriptor*>(f.send->end().slot(0));
  EXPECT_EQ(d->bytes, 4000u);
  EXPECT_EQ(d->copied, 0u);
  d->copied = 2000;
  EXPECT_TRUE(p.send(&err)) << "progress of the reader must keep the sender's timeout away";
  EXPECT_FALSE(p.send(&err));
  EXPECT_FALSE(p.sender().finished());
  EXPECT_TRUE(p.recv(&err));
  EXPECT_EQ(d->copied, 4000u);
  EXPECT_TRUE(p.send(&err));
  EXPECT_EQ(err, ncclSuccess);
}

TEST(HostDirectSend, DescriptorInTheMiddleOfAReceiveIsAnError) {
  HostFifo f(kSlot, 4, 5, 1, /*peerReads=*/true);
  Pair p(1000, 2024);
  p.wire(f, true);
  // The sender first sends one slot's worth through the FIFO, then 1000 floats zero-copy;
  // the receiver takes all 2024 as one receive.
  std::vector<float> head(kSlot / sizeof(float), 3.0f);
  sched::Segment plain = p.sender().segments[0];
  plain.flags &= static_cast<uint8_t>(~sched::kSegDirect);
  plain.src = head.data();
  plain.count = head.size();
  p.sender().segments.insert(p.sender().segments.begin(), plain);
  ncclResult_t err = ncclSuccess;
  EXPECT_TRUE(p.send(&err));    // the plain piece
  EXPECT_TRUE(p.recv(&err));  // takes it: 1024 of 2024 done
  const std::string msg = receiverRefuses(p);   // the descriptor arrives mid-receive
  EXPECT_NE(msg.find("rank 5 sent 4000 bytes zero-copy where this rank was in the middle of a receive"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace chorus
