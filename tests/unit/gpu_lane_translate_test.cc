// Host plan -> lane-kernel launch arrays (src/gpu/lane_translate.cc), on
// hand-built segment plans over FIFOs in host memory: the connector table
// (one launch entry per connector; both ends of a FIFO see the same
// counters), conn ids and ring tables remapped to the launch's arrays,
// zero-copy only where the receiver reads the sender's memory, point-to-point
// in bytes, launches split where the reduction spec changes or a launch is
// full (at task boundaries only), a launch whose size does not depend on the
// message size, LL piece sizing, and the invariants it refuses to break.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm.h"
#include "gpu/lane_translate.h"
#include "plan/plan_builder.h"
#include "transport/connection_table.h"
#include "unit/host_fifo_util.h"

namespace chorus {
namespace {

using namespace chorus::test;
using sched::kNoConn;

constexpr uint32_t kSlot = 131072;

class LaneTranslate : public ::testing::Test {
 protected:
  // Position counters handed out per (end, side), as the executor would.
  std::map<std::pair<const void*, bool>, uint64_t> positions;
  gpu::PositionFor positionFor = [this](const FifoEnd& e, bool sender) { return &positions[{e.ctl, sender}]; };
  float in[1024] = {}, out[1024] = {};
  Plan plan;
  std::vector<gpu::LaunchArrays> launches;

  uint16_t addTask(ncclDataType_t type, ReduceKind kind, CollType coll = CollType::AllReduce) {
    Task t;
    t.type = coll;
    t.dtype = type;
    t.spec = ReduceSpec{type, kind, nullptr, 4};
    plan.tasks.push_back(t);
    return static_cast<uint16_t>(plan.tasks.size() - 1);
  }
  // A connector's id in the plan's table (one entry per connector, as the plan builder makes it).
  int16_t conn(RecvConnector* r) { return connId(r, nullptr); }
  int16_t conn(SendConnector* s) { return connId(nullptr, s); }
  void addLanes(size_t n, uint32_t pieceBytes = kSlot, Proto proto = Proto::Simple) {
    for (size_t i = 0; i < n; ++i) {
      plan.lanes.emplace_back();
      plan.lanes.back().pieceBytes = pieceBytes;
      plan.lanes.back().proto = proto;
    }
  }
  // A Single segment of `task`: receives from `recv`, combines with in[], writes out[] and sends to `send`.
  sched::Segment single(uint16_t task, int16_t recv, int16_t send, uint64_t count) {
    sched::Segment s;
    s.task = task;
    s.count = count;
    s.src = in;
    s.dst = out;
    s.conn[0] = recv;
    s.conn[2] = send;
    s.flags = static_cast<uint8_t>(sched::kSegHasSrc | sched::kSegHasDst);
    return s;
  }
  // A plain send of in[] (no local output), zero-copy if `direct`.
  sched::Segment sendOnly(uint16_t task, int16_t send, uint64_t count, bool direct) {
    sched::Segment s = single(task, kNoConn, send, count);
    s.dst = nullptr;
    s.flags = static_cast<uint8_t>(sched::kSegHasSrc | (direct ? sched::kSegDirect : 0));
    return s;
  }
  ncclResult_t translate(const gpu::PositionFor& where) { return gpu::translatePlan(plan, where, &launches); }
  ncclResult_t translate() { return translate(positionFor); }

 private:
  std::map<const void*, int16_t> ids_;
  int16_t connId(RecvConnector* r, SendConnector* s) {
    const void* key = r ? static_cast<const void*>(r) : static_cast<const void*>(s);
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    plan.conns.push_back(ConnRef{r, s});
    return ids_[key] = static_cast<int16_t>(plan.conns.size() - 1);
  }
};

TEST_F(LaneTranslate, SegmentsConnectorsAndPositionsMapOneToOne) {
  HostFifo a(kSlot, 8, 0, 1), b(kSlot, 8, 2, 0);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  const int16_t fromB = conn(b.recv.get()), toA = conn(a.send.get());
  // A second table entry naming b's receive end again: still one connector end in the launch.
  plan.conns.push_back(ConnRef{b.recv.get(), nullptr});
  const auto fromBAgain = static_cast<int16_t>(plan.conns.size() - 1);
  addLanes(1);
  plan.lanes[0].segments = {single(t, fromB, toA, 100), single(t, fromBAgain, kNoConn, 50),
                            single(t, kNoConn, toA, 0)};  // empty segments are dropped
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  const auto& L = launches[0];
  EXPECT_EQ(L.header.type, ncclFloat32);
  EXPECT_EQ(L.header.kind, ReduceKind::Sum);
  EXPECT_EQ(L.header.divisor, 4);
  EXPECT_EQ(L.header.nSegments, 2);
  EXPECT_EQ(L.header.nFifos, 2);
  ASSERT_EQ(L.lanes.size(), 1u);
  EXPECT_EQ(L.lanes[0].firstSegment, 0u);
  EXPECT_EQ(L.lanes[0].nSegments, 2u);
  EXPECT_EQ(L.lanes[0].pieceBytes, kSlot);
  ASSERT_EQ(L.fifos.size(), 2u);  // b's receive end and a's send end, each once
  ASSERT_EQ(L.segments.size(), 2u);
  EXPECT_EQ(L.segments[1].conn[0], L.segments[0].conn[0]);
  EXPECT_EQ(L.segments[1].conn[2], kNoConn);
  EXPECT_EQ(L.segments[0].count, 100u);
  EXPECT_EQ(L.segments[1].count, 50u);
  // The steps the kernel generates name the launch's fifo indices.
  const sched::StepDesc d = sched::segmentStep(L.segments[0], nullptr, 0);
  ASSERT_EQ(d.nRecv, 1);
  ASSERT_EQ(d.nSend, 1);
  ASSERT_TRUE(d.recv[0] >= 0 && d.recv[0] < 2 && d.send[0] >= 0 && d.send[0] < 2);
  EXPECT_NE(d.recv[0], d.send[0]);
  const dev::DevFifo& recvEnd = L.fifos[d.recv[0]];
  const dev::DevFifo& sendEnd = L.fifos[d.send[0]];
  EXPECT_EQ(recvEnd.tail, reinterpret_cast<uint64_t*>(&b.recv->end().ctl->tail));
  EXPECT_EQ(recvEnd.head, reinterpret_cast<uint64_t*>(&b.recv->end().ctl->head));
  EXPECT_EQ(recvEnd.peer, 2);
  EXPECT_EQ(sendEnd.peer, 1);
  EXPECT_EQ(sendEnd.slots, a.send->end().slots);
  EXPECT_EQ(sendEnd.nslots, 8u);
  EXPECT_EQ(recvEnd.position, (&positions[{b.recv->end().ctl, false}]));
  EXPECT_EQ(sendEnd.position, (&positions[{a.send->end().ctl, true}]));
  EXPECT_NE(recvEnd.position, sendEnd.position);
}

TEST_F(LaneTranslate, BothEndsOfAFifoShareCounters) {
  HostFifo f(kSlot, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  addLanes(2);
  plan.lanes[0].segments = {single(t, kNoConn, conn(f.send.get()), 10)};
  plan.lanes[1].segments = {single(t, conn(f.recv.get()), kNoConn, 10)};
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(launches[0].fifos.size(), 2u);
  EXPECT_EQ(launches[0].fifos[0].tail, launches[0].fifos[1].tail);
  EXPECT_EQ(launches[0].fifos[0].head, launches[0].fifos[1].head);
  EXPECT_NE(launches[0].fifos[0].position, launches[0].fifos[1].position);  // each side counts its own
  EXPECT_EQ(launches[0].lanes[1].firstSegment, 1u);
}

TEST_F(LaneTranslate, ZeroCopyOnlyWhereTheReceiverReadsTheSendersMemory) {
  HostFifo reads(kSlot, 4, 0, 1, /*peerReads=*/true), cannot(kSlot, 4, 0, 2, /*peerReads=*/false);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum, CollType::Send);  // a byte-copy launch
  addLanes(2);
  const int16_t toReader = conn(reads.send.get()), toOther = conn(cannot.send.get());
  plan.lanes[0].segments = {sendOnly(t, toReader, 10, true), sendOnly(t, toReader, 5, false)};
  plan.lanes[1].segments = {sendOnly(t, toOther, 10, true)};
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  const auto& segs = launches[0].segments;
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(launches[0].header.type, ncclUint8);
  EXPECT_NE(segs[0].flags & sched::kSegDirect, 0);
  EXPECT_EQ(sched::segmentStep(segs[0], nullptr, 0).direct, 1);
  EXPECT_EQ(segs[0].count, 40u) << "a descriptor's size is the step's bytes";
  EXPECT_EQ(segs[1].flags & sched::kSegDirect, 0) << "an unregistered send stays a FIFO send";
  EXPECT_EQ(segs[2].flags & sched::kSegDirect, 0) << "the receiver cannot read this sender's memory";
  EXPECT_EQ(sched::segmentStep(segs[2], nullptr, 0).direct, 0);
}

TEST_F(LaneTranslate, LaunchesSplitWhereTheSpecChangesAndMergeEqualOnes) {
  HostFifo f(kSlot, 4, 0, 1);
  const uint16_t t0 = addTask(ncclFloat32, ReduceKind::Sum);
  const uint16_t t1 = addTask(ncclFloat32, ReduceKind::Sum);  // same spec: fused with t0
  const uint16_t t2 = addTask(ncclBfloat16, ReduceKind::Max);
  const int16_t c = conn(f.send.get());
  addLanes(1);
  plan.lanes[0].segments = {single(t0, kNoConn, c, 10), single(t1, kNoConn, c, 20), single(t2, kNoConn, c, 30)};
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].segments.size(), 2u);
  EXPECT_EQ(launches[0].header.type, ncclFloat32);
  ASSERT_EQ(launches[1].segments.size(), 1u);
  EXPECT_EQ(launches[1].segments[0].count, 30u);
  EXPECT_EQ(launches[1].header.type, ncclBfloat16);
  EXPECT_EQ(launches[1].header.kind, ReduceKind::Max);
  // The connector keeps its position counter across launches.
  EXPECT_EQ(launches[0].fifos[0].position, launches[1].fifos[0].position);
}

// Ring orders travel with the launch: a segment's ringTable indexes the
// launch's own copy, one copy per ring however many segments use it.
TEST_F(LaneTranslate, RingTablesAreCopiedOncePerRing) {
  HostFifo prev(kSlot, 4, 3, 0), next(kSlot, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum, CollType::AllGather);
  plan.rankTable = {9, 9, 9, 2, 0, 1, 3};  // this ring's order starts at entry 3
  addLanes(1);
  sched::Segment g;
  g.kind = sched::SegmentKind::RingGather;
  g.task = t;
  g.src = in;
  g.dst = out;
  g.count = 64;
  g.roundElems = 32;
  g.blockElems = 64;
  g.nranks = 4;
  g.pos = 1;
  g.ringTable = 3;
  g.conn[0] = conn(prev.recv.get());
  g.conn[1] = conn(next.send.get());
  sched::Segment g2 = g;
  g2.begin = 64;
  plan.lanes[0].segments = {g, g2};
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  const auto& L = launches[0];
  EXPECT_EQ(L.rankTable, (std::vector<int32_t>{2, 0, 1, 3}));
  EXPECT_EQ(L.header.nRankTable, 4);
  ASSERT_EQ(L.segments.size(), 2u);
  EXPECT_EQ(L.segments[0].ringTable, 0);
  EXPECT_EQ(L.segments[1].ringTable, 0);
  // The generated steps address the same blocks from the launch's table as from the plan's.
  for (uint64_t i = 0; i < sched::segmentSteps(g); ++i) {
    const sched::StepDesc want = sched::segmentStep(g, plan.ringTableOf(g), i);
    const sched::StepDesc got = sched::segmentStep(L.segments[0], L.rankTable.data(), i);
    EXPECT_EQ(got.dstOff, want.dstOff) << "step " << i;
    EXPECT_EQ(got.count, want.count) << "step " << i;
  }
}

// A launch's parameters hold a bounded number of segments: a long run of
// equal collectives is split into several launches, at task boundaries only,
// with every segment of a task (on every lane) in the same launch.
TEST_F(LaneTranslate, ManyEqualCollectivesSplitAtTaskBoundariesWhenALaunchIsFull) {
  constexpr int kTasks = 40;  // 2 lanes x (3..9) segments per task: about 480 segments, > one launch
  HostFifo f0(kSlot, 4, 0, 1), f1(kSlot, 4, 0, 2);
  addLanes(2);
  const int16_t c0 = conn(f0.send.get()), c1 = conn(f1.send.get());
  std::vector<size_t> perTask;
  for (int k = 0; k < kTasks; ++k) {
    const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
    const size_t n = 3 + static_cast<size_t>(k % 7);
    perTask.push_back(2 * n);
    for (size_t i = 0; i < n; ++i) {
      plan.lanes[0].segments.push_back(single(t, kNoConn, c0, 1 + i));
      plan.lanes[1].segments.push_back(single(t, kNoConn, c1, 1 + i));
    }
  }
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_GE(launches.size(), 2u);
  size_t total = 0, nextTask = 0;
  for (const auto& l : launches) {
    EXPECT_LE(l.segments.size(), static_cast<size_t>(dev::kLaunchMaxSegments));
    EXPECT_EQ(l.header.nSegments, static_cast<int>(l.segments.size()));
    // Whole tasks, in order.
    std::map<size_t, size_t> ofTask;
    for (const auto& s : l.segments) ofTask[l.tasks.at(s.task)] += 1;
    for (const auto& [task, n] : ofTask) {
      EXPECT_EQ(task, nextTask) << "tasks out of order across launches";
      EXPECT_EQ(n, perTask[task]) << "task " << task << " was cut between two launches";
      nextTask = task + 1;
    }
    total += l.segments.size();
  }
  EXPECT_EQ(nextTask, static_cast<size_t>(kTasks));
  size_t want = 0;
  for (size_t n : perTask) want += n;
  EXPECT_EQ(total, want);
}

// Operation fingerprints in GPU mode (docs/reliability.md): every connector
// end points at its FIFO's fingerprints, segments name the launch's own task
// list (whose entries are the plan's tasks, for this call's prints), and
// exactly the send ends classifySends leaves unproven are drained by their
// lane at the end of the launch.
TEST_F(LaneTranslate, LaunchTasksFingerprintsAndDrainedSends) {
  HostFifo toA(kSlot, 4, 0, 1), toB(kSlot, 4, 0, 2), fromA(kSlot, 4, 1, 0);
  const uint16_t skipped = addTask(ncclInt32, ReduceKind::Sum);  // another spec: another launch
  const uint16_t t1 = addTask(ncclFloat32, ReduceKind::Sum), t2 = addTask(ncclFloat32, ReduceKind::Sum);
  const int16_t a = conn(toA.send.get()), b = conn(toB.send.get()), in = conn(fromA.recv.get());
  addLanes(3);
  plan.lanes[0].segments = {single(skipped, kNoConn, a, 8), single(t1, kNoConn, a, 8)};
  plan.lanes[1].segments = {single(t2, kNoConn, b, 8)};
  plan.lanes[2].segments = {single(t2, in, kNoConn, 8)};
  plan.unprovenSends = {toB.send.get()};
  plan.sendsClassified = true;
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].tasks, std::vector<size_t>{skipped});
  const auto& L = launches[1];
  ASSERT_EQ(L.tasks, (std::vector<size_t>{t1, t2}));
  EXPECT_EQ(L.header.nTasks, 2);
  ASSERT_EQ(L.segments.size(), 3u);
  EXPECT_EQ(L.segments[0].task, 0u);  // t1
  EXPECT_EQ(L.segments[1].task, 1u);  // t2
  EXPECT_EQ(L.segments[2].task, 1u);
  ASSERT_EQ(L.fifos.size(), 3u);
  int drained = 0;
  for (const dev::DevFifo& f : L.fifos) {
    EXPECT_TRUE(f.prints == &toA.send->end().ctl->prints || f.prints == &toB.send->end().ctl->prints ||
                f.prints == &fromA.send->end().ctl->prints);
    if (f.prints == &toB.send->end().ctl->prints) {
      EXPECT_EQ(f.drainBy, 1) << "the send to rank 2 is unproven: its lane (the launch's second) drains it";
      ++drained;
    } else {
      EXPECT_EQ(f.drainBy, -1);
    }
  }
  EXPECT_EQ(drained, 1);

  // A plan that was never classified drains every send end.
  plan.sendsClassified = false;
  ASSERT_EQ(translate(), ncclSuccess);
  for (const dev::DevFifo& f : launches[1].fifos)
    EXPECT_EQ(f.drainBy >= 0, f.prints != &fromA.send->end().ctl->prints) << "only receive ends are not drained";
}

// One task that needs more segments than a launch holds cannot be split (its
// lanes wait for each other): refused with a message that says why.
TEST_F(LaneTranslate, ATaskTooLargeForOneLaunchIsInvalidUsage) {
  HostFifo f(kSlot, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  const int16_t c = conn(f.send.get());
  addLanes(1);
  for (int i = 0; i <= dev::kLaunchMaxSegments; ++i) plan.lanes[0].segments.push_back(single(t, kNoConn, c, 1));
  ASSERT_EQ(translate(), ncclInvalidUsage);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("AllReduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(dev::kLaunchMaxSegments + 1) + " segments"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a launch holds"), std::string::npos) << msg;

  plan.lanes[0].segments.pop_back();  // exactly full: one launch
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].segments.size(), static_cast<size_t>(dev::kLaunchMaxSegments));
}

// A ring all-reduce of 2^31 + 1000 floats (8 GiB; the translator never
// dereferences the buffers, so nothing that large exists) is one launch of
// the same size as one of 1000 floats: one segment whose 64-bit count
// survives, and whose generated steps reach past 2^31 elements.
TEST_F(LaneTranslate, ALaunchDoesNotGrowWithTheMessage) {
  HostFifo fromPrev(kSlot, 8, 0, 1), toNext(kSlot, 8, 1, 2);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  const int16_t r = conn(fromPrev.recv.get()), s = conn(toNext.send.get());
  addLanes(1);
  constexpr int kRanks = 4;
  constexpr uint64_t kRoundElems = kRanks * (kSlot / 2 / sizeof(float));
  auto translateCount = [&](uint64_t count) {
    sched::Segment seg;
    seg.kind = sched::SegmentKind::RingAllReduce;
    seg.task = t;
    seg.src = in;
    seg.dst = out;
    seg.count = count;
    seg.roundElems = kRoundElems;
    seg.nranks = kRanks;
    seg.pos = 1;
    seg.conn[0] = r;
    seg.conn[1] = s;
    plan.lanes[0].segments = {seg};
    EXPECT_EQ(translate(), ncclSuccess);
    EXPECT_EQ(launches.size(), 1u);
  };
  translateCount(1000);
  ASSERT_EQ(launches.size(), 1u);
  const gpu::LaunchArrays small = launches[0];
  const uint64_t huge = (uint64_t(1) << 31) + 1000;
  translateCount(huge);
  ASSERT_EQ(launches.size(), 1u);
  const gpu::LaunchArrays& big = launches[0];
  EXPECT_EQ(big.lanes.size(), small.lanes.size());
  EXPECT_EQ(big.segments.size(), small.segments.size());
  EXPECT_EQ(big.fifos.size(), small.fifos.size());
  EXPECT_EQ(big.rankTable.size(), small.rankTable.size());
  ASSERT_EQ(big.segments.size(), 1u);
  const sched::Segment& seg = big.segments[0];
  EXPECT_EQ(seg.count, huge);
  EXPECT_EQ(seg.roundElems, kRoundElems);
  const uint64_t rounds = sched::ceilDiv(huge, kRoundElems);
  EXPECT_EQ(sched::segmentSteps(seg), rounds * static_cast<uint64_t>(sched::ringAllReduceSteps(kRanks)));
  EXPECT_GT(sched::segmentSteps(seg), sched::segmentSteps(small.segments[0]) * 1000);
  const sched::StepDesc last = sched::segmentStep(seg, nullptr, sched::segmentSteps(seg) - 1);
  ASSERT_NE(last.dstOff, sched::kNoBuffer);  // the last step keeps the final chunk
  EXPECT_GE(last.dstOff, (rounds - 1) * kRoundElems);
  EXPECT_LE(last.dstOff + last.count, huge);
}

// Point-to-point tasks move bytes: a group that sends floats and receives
// doubles is one launch of byte copies with byte counts.
TEST_F(LaneTranslate, PointToPointGroupsRunAsOneByteLaunch) {
  HostFifo out0(kSlot, 4, 0, 1), in0(kSlot, 4, 1, 0);
  const uint16_t send = addTask(ncclFloat32, ReduceKind::Sum, CollType::Send);
  const uint16_t recv = addTask(ncclFloat64, ReduceKind::Sum, CollType::Recv);
  addLanes(2);
  plan.lanes[0].segments = {sendOnly(send, conn(out0.send.get()), 10, false)};
  sched::Segment r = single(recv, conn(in0.recv.get()), kNoConn, 3);
  r.flags = sched::kSegHasDst;
  r.begin = 2;  // elements into the buffer: bytes after translation
  plan.lanes[1].segments = {r};
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].header.type, ncclUint8);
  ASSERT_EQ(launches[0].segments.size(), 2u);
  EXPECT_EQ(launches[0].segments[0].count, 40u);
  EXPECT_EQ(launches[0].segments[1].count, 24u);
  EXPECT_EQ(launches[0].segments[1].begin, 16u);
  for (const auto& s : launches[0].segments) EXPECT_NE(s.flags & sched::kSegBytes, 0);
}

// Every rank launches its group's point-to-point operations before its
// collectives, whatever the call order, so no rank sits in a collective
// waiting for a peer whose send comes after that peer's collective.
TEST_F(LaneTranslate, PointToPointRunsBeforeTheGroupsCollectives) {
  HostFifo ring(kSlot, 4, 0, 1), p2p(kSlot, 4, 0, 1);
  const uint16_t coll = addTask(ncclFloat32, ReduceKind::Sum);
  const uint16_t send = addTask(ncclFloat32, ReduceKind::Sum, CollType::Send);
  addLanes(2);
  plan.lanes[0].segments = {single(coll, kNoConn, conn(ring.send.get()), 5)};
  plan.lanes[1].segments = {sendOnly(send, conn(p2p.send.get()), 7, false)};
  ASSERT_EQ(translate(), ncclSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].header.type, ncclUint8);
  ASSERT_EQ(launches[0].segments.size(), 1u);
  EXPECT_EQ(launches[0].segments[0].count, 28u);
  EXPECT_EQ(launches[1].header.type, ncclFloat32);
  ASSERT_EQ(launches[1].segments.size(), 1u);
  EXPECT_EQ(launches[1].segments[0].count, 5u);
  EXPECT_EQ(launches[1].segments[0].flags & sched::kSegBytes, 0) << "collectives stay in elements";
}

TEST_F(LaneTranslate, LLPiecesCarryHalfASlotAtMostFourKiB) {
  EXPECT_EQ(gpu::devicePieceBytes(Proto::LL, 8192, 8192), 4096u);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::LL, 2048, 2048), 1024u);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::LL, 65536, 65536), dev::kLLMaxPieceBytes);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::Simple, 131072, 131072), 131072u);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::Simple, 131072, 65536), 65536u);

  HostFifo f(8192, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat16, ReduceKind::Sum);
  addLanes(1, 4096, Proto::LL);
  plan.lanes[0].segments = {single(t, kNoConn, conn(f.send.get()), 10)};
  ASSERT_EQ(translate(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].lanes[0].protocol, dev::Protocol::LL);
  EXPECT_EQ(launches[0].lanes[0].pieceBytes, 4096u);
}

// The peer cuts its steps into the plan's pieces too: a lane whose pieces do
// not fit its slots is refused, never cut smaller on this rank alone (its
// peer would report every slot as a size mismatch).
TEST_F(LaneTranslate, RefusesPiecesThatDoNotFitTheLanesSlots) {
  HostFifo f(8192, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  addLanes(1, 8192, Proto::LL);  // LL lines take twice the payload
  plan.lanes[0].segments = {single(t, kNoConn, conn(f.send.get()), 10)};
  EXPECT_EQ(translate(), ncclInternalError);
  std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("lane 0 moves LL pieces of 8192 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("(at most 4096)"), std::string::npos) << why;

  launches.clear();
  plan.lanes[0].proto = Proto::Simple;
  plan.lanes[0].pieceBytes = 16384;
  EXPECT_EQ(translate(), ncclInternalError);
  why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("Simple pieces of 16384 bytes, which do not fit its 8192-byte slots"), std::string::npos) << why;

  launches.clear();
  plan.lanes[0].pieceBytes = 8192;
  EXPECT_EQ(translate(), ncclSuccess) << ncclGetLastError(nullptr);
}

// The kernel finds slot k at k * slotBytes: a framed end (a header before
// each slot, as host-mode network links keep) is refused.
TEST_F(LaneTranslate, RefusesAFramedConnector) {
  HostFifo f(4096, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  addLanes(1, 4096);
  FifoEnd framedEnd = f.send->end();
  framedEnd.slotStride = 4096 + 64;
  SendConnector framed(framedEnd);
  plan.lanes[0].segments = {single(t, kNoConn, conn(&framed), 10)};
  EXPECT_EQ(translate(), ncclInternalError);
  const std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("keeps 4160 bytes between 4096-byte slots"), std::string::npos) << why;

  launches.clear();
  FifoEnd packedEnd = f.send->end();
  packedEnd.slotStride = 4096;
  SendConnector packed(packedEnd);
  plan.lanes[0].segments = {single(t, kNoConn, conn(&packed), 10)};
  EXPECT_EQ(translate(), ncclSuccess) << ncclGetLastError(nullptr);
}

// The tuner keeps LL off network links in GPU mode (an LL sender never
// advances the tail the network mover sends below); a plan that has one
// anyway is refused, naming the lane and the peer, instead of hanging.
TEST_F(LaneTranslate, RefusesLLOverANetworkLink) {
  HostFifo local(8192, 4, 0, 1);
  HostFifo network(8192, 4, 0, 1, false, std::make_shared<LinkHealth>());
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  addLanes(1, 4096, Proto::LL);
  plan.lanes[0].segments = {single(t, kNoConn, conn(local.send.get()), 10)};
  ASSERT_EQ(translate(), ncclSuccess) << ncclGetLastError(nullptr);

  launches.clear();
  plan.lanes[0].segments = {single(t, kNoConn, conn(network.send.get()), 10)};
  EXPECT_EQ(translate(), ncclInvalidUsage);
  const std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("lane 0 would run LL"), std::string::npos) << why;
  EXPECT_NE(why.find("network link to rank 1"), std::string::npos) << why;

  launches.clear();
  plan.lanes[0].proto = Proto::Simple;
  plan.lanes[0].pieceBytes = 8192;
  EXPECT_EQ(translate(), ncclSuccess) << "Simple over the same link: " << ncclGetLastError(nullptr);
}

TEST_F(LaneTranslate, RefusesAConnectorSharedByTwoLanes) {
  HostFifo f(kSlot, 4, 0, 1);
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  addLanes(2);
  const int16_t c = conn(f.send.get());
  plan.lanes[0].segments = {single(t, kNoConn, c, 10)};
  plan.lanes[1].segments = {single(t, kNoConn, c, 10)};
  EXPECT_EQ(translate(), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("used by lanes 0 and 1"), std::string::npos);
}

TEST_F(LaneTranslate, RefusesTooManyLanesAndMissingCounters) {
  const uint16_t t = addTask(ncclFloat32, ReduceKind::Sum);
  std::vector<std::unique_ptr<HostFifo>> fifos;
  addLanes(gpu::kMaxLanesPerLaunch + 1, 4096);
  for (auto& l : plan.lanes) {
    fifos.push_back(std::make_unique<HostFifo>(4096, 2, 0, 1));
    l.segments = {single(t, kNoConn, conn(fifos.back()->send.get()), 1)};
  }
  EXPECT_EQ(translate(), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("65 lanes"), std::string::npos) << ncclGetLastError(nullptr);

  plan.lanes.resize(1);
  gpu::PositionFor none = [](const FifoEnd&, bool) -> uint64_t* { return nullptr; };
  EXPECT_EQ(translate(none), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("no device position counter"), std::string::npos);
}

// A lane runs its segments in order, and launches run tasks in order: a lane
// whose segments go back to an earlier task cannot be run.
TEST_F(LaneTranslate, RefusesSegmentsOutOfTaskOrder) {
  HostFifo f(kSlot, 4, 0, 1);
  const uint16_t t0 = addTask(ncclFloat32, ReduceKind::Sum);
  const uint16_t t1 = addTask(ncclFloat32, ReduceKind::Max);
  const int16_t c = conn(f.send.get());
  addLanes(1);
  plan.lanes[0].segments = {single(t1, kNoConn, c, 10), single(t0, kNoConn, c, 10)};
  EXPECT_EQ(translate(), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("out of task order"), std::string::npos)
      << ncclGetLastError(nullptr);
}

}  // namespace
}  // namespace chorus
