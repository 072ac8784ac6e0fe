// Ring schedules (src/sched/ring.h) as segments. Data is split across
// channels, then each channel's share is walked in rounds whose chunks fit in
// half a FIFO (see ring.h for why that avoids deadlock and keeps two chunks in
// flight per link): one RingAllReduce / RingGather / RingScatter segment per
// channel generates those rounds' steps (src/sched/segment.h). Each channel
// follows its ring from the communicator's graph: ring position p holds rank
// order[p], and a rank computes the schedule at its position; where the data
// layout depends on ranks (AllGather, ReduceScatter, the root of Broadcast
// and Reduce) chunk positions map back to ranks through the plan's rank table.
#include <algorithm>

#include "core/result.h"
#include "plan/plan_builder.h"
#include "sched/ring.h"

namespace chorus {

using sched::RingAction;
using sched::Segment;
using sched::SegmentKind;

size_t halfFifoElems(const PlanBuilder& b, ConnClass cls, Proto proto, size_t esz) {
  const size_t piece = std::max<size_t>(1, b.pieceBytes(cls, proto) / esz);
  return piece * std::max<uint32_t>(1, b.nslots() / 2);
}

namespace {

size_t alignElems(size_t esz) { return std::max<size_t>(1, 64 / esz); }

// This rank's position on channel `ch`'s ring and its two connectors.
ncclResult_t ringChannel(PlanBuilder& b, Proto proto, int ch, Segment* s) {
  const int n = b.nranks();
  const RingOrder ring = b.ringOrder(ch);
  s->nranks = n;
  s->pos = ring.positionOf(b.rank());
  CHORUS_CHECK(b.recvFrom(ConnClass::Ring, proto, ch, ring.at(sched::ringPrev(s->pos, n)), &s->conn[0]));
  return b.sendTo(ConnClass::Ring, proto, ch, ring.at(sched::ringNext(s->pos, n)), &s->conn[1]);
}

// AllReduce, AllGather, ReduceScatter: one segment per channel. Chunk
// indices of AllReduce only have to agree between ranks, so they need no
// mapping back to ranks; the blockwise collectives' chunk k is the block of
// the rank at ring position k.
ncclResult_t ringRounds(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  const size_t esz = typeSize(t.dtype);
  const bool allReduce = t.type == CollType::AllReduce;
  const SegmentKind kind = allReduce                       ? SegmentKind::RingAllReduce
                           : t.type == CollType::AllGather ? SegmentKind::RingGather
                                                           : SegmentKind::RingScatter;
  const size_t chunk = halfFifoElems(b, ConnClass::Ring, d.proto, esz);
  for (int ch = 0; ch < d.nchannels; ++ch) {
    const sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, alignElems(esz));
    if (range.count == 0) continue;
    Segment s = b.segment(t, kind);
    CHORUS_CHECK(ringChannel(b, d.proto, ch, &s));
    s.begin = range.begin;
    s.count = range.count;
    s.roundElems = allReduce ? chunk * static_cast<size_t>(b.nranks()) : chunk;
    if (!allReduce) {
      s.blockElems = t.count;
      s.ringTable = b.addRingTable(b.ringOrder(ch));
      const char* ownBlock = static_cast<const char*>(t.recvbuff) + static_cast<size_t>(b.rank()) * t.count * esz;
      if (kind == SegmentKind::RingGather && t.sendbuff == ownBlock) s.flags |= sched::kSegInPlace;
    }
    b.lane(ConnClass::Ring, d.proto, ch).segments.push_back(s);
  }
  return ncclSuccess;
}

// Broadcast and Reduce: a chain along the ring starting after (ending at)
// the root's position; no cycle, so one step per channel is enough and its
// pieces stream down the chain.
ncclResult_t ringChain(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  const int n = b.nranks();
  const size_t esz = typeSize(t.dtype);
  const bool bcast = t.type == CollType::Broadcast;
  for (int ch = 0; ch < d.nchannels; ++ch) {
    const sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, alignElems(esz));
    if (range.count == 0) continue;
    const RingOrder ring = b.ringOrder(ch);
    const int pos = ring.positionOf(b.rank());
    const int rootPos = ring.positionOf(t.root);
    const RingAction action =
        bcast ? sched::ringBroadcastAction(pos, rootPos, n) : sched::ringReduceAction(pos, rootPos, n);
    const sched::RingActionShape shape = sched::ringActionShape(action);
    // The chain's ends have one neighbour only; connect just what is used.
    Segment s = b.segment(t, SegmentKind::Single);
    if (shape.recvs)
      CHORUS_CHECK(b.recvFrom(ConnClass::Ring, d.proto, ch, ring.at(sched::ringPrev(pos, n)), &s.conn[0]));
    if (shape.sends) CHORUS_CHECK(b.sendTo(ConnClass::Ring, d.proto, ch, ring.at(sched::ringNext(pos, n)), &s.conn[2]));
    const bool inPlace = action == RingAction::CopySend && t.sendbuff == t.recvbuff;
    s.begin = range.begin;
    s.count = range.count;
    s.flags = static_cast<uint8_t>((shape.readsInput && t.sendbuff ? sched::kSegHasSrc : 0) |
                                   (shape.keeps && !inPlace && t.recvbuff ? sched::kSegHasDst : 0) |
                                   (shape.reduces ? sched::kSegPreSrc : 0) | (shape.divides ? sched::kSegPost : 0));
    b.lane(ConnClass::Ring, d.proto, ch).segments.push_back(s);
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t expandRing(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  switch (t.type) {
    case CollType::AllReduce:
    case CollType::AllGather:
    case CollType::ReduceScatter:
      return ringRounds(b, t, d);
    case CollType::Broadcast:
    case CollType::Reduce:
      return ringChain(b, t, d);
    default:
      return fail(ncclInternalError, "ring schedule requested for %s", collName(t.type));
  }
}

}  // namespace chorus
