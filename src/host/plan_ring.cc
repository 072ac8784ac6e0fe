// Expands ring schedules (src/sched/ring.h) into host steps. Data is split
// across channels, then each channel's share is walked in rounds whose chunks
// fit in half a FIFO (see ring.h for why that avoids deadlock and keeps two
// chunks in flight per link). Each channel follows its ring from the
// communicator's graph: ring position p holds rank order[p], and a rank
// computes the schedule at its position, mapping chunk positions back to
// ranks' blocks where the data layout depends on ranks (AllGather,
// ReduceScatter, the root of Broadcast and Reduce).
#include <algorithm>

#include "core/result.h"
#include "host/plan_builder.h"
#include "sched/ring.h"

namespace chorus {

using sched::RingAction;

HostStep ringActionStep(const Task& t, RingAction action, RecvConnector* recv, SendConnector* send,
                        const char* src, char* dst, size_t count) {
  HostStep s;
  s.spec = &t.spec;
  s.count = count;
  const bool recvs = action != RingAction::Send && action != RingAction::CopySend;
  const bool sends = action != RingAction::Recv && action != RingAction::RecvReduceCopy;
  const bool reduces = action == RingAction::Send || action == RingAction::RecvReduceSend ||
                       action == RingAction::RecvReduceCopy || action == RingAction::RecvReduceCopySend;
  const bool keeps = action == RingAction::RecvReduceCopy || action == RingAction::RecvReduceCopySend ||
                     action == RingAction::RecvCopySend || action == RingAction::Recv ||
                     action == RingAction::CopySend;
  if (recvs) s.recv[s.nRecv++] = recv;
  if (sends) s.send[s.nSend++] = send;
  if (reduces || action == RingAction::CopySend) s.src = src;
  s.preSrc = reduces;
  if (keeps) s.dst = dst;
  if (action == RingAction::CopySend && dst == src) s.dst = nullptr;  // in place: nothing to copy
  s.post = action == RingAction::RecvReduceCopy || action == RingAction::RecvReduceCopySend;
  return s;
}

size_t ringChunkElems(const PlanBuilder& b, Proto proto, size_t esz) {
  size_t piece = std::max<size_t>(1, b.slotBytes(proto) / esz);
  return piece * std::max<uint32_t>(1, b.nslots() / 2);
}

namespace {

struct RingCtx {
  explicit RingCtx(const Task& task) : t(task) {}
  const Task& t;
  Lane* lane = nullptr;
  RecvConnector* recv = nullptr;
  SendConnector* send = nullptr;
  RingOrder ring;
  int pos = 0;  // this rank's position on the channel's ring
};

HostStep ringStep(const RingCtx& c, RingAction action, const char* src, char* dst, size_t count) {
  return ringActionStep(c.t, action, c.recv, c.send, src, dst, count);
}

ncclResult_t channelCtx(PlanBuilder& b, Proto proto, int ch, RingCtx* ctx) {
  const int n = b.nranks();
  ctx->ring = b.ringOrder(ch);
  ctx->pos = ctx->ring.positionOf(b.rank());
  const int next = ctx->ring.at(sched::ringNext(ctx->pos, n));
  const int prev = ctx->ring.at(sched::ringPrev(ctx->pos, n));
  ctx->lane = &b.lane(ConnClass::Ring, proto, ch);
  CHORUS_CHECK(b.recvFrom(ConnClass::Ring, proto, ch, prev, &ctx->recv));
  CHORUS_CHECK(b.sendTo(ConnClass::Ring, proto, ch, next, &ctx->send));
  return ncclSuccess;
}

size_t alignElems(size_t esz) { return std::max<size_t>(1, 64 / esz); }

// Chunk indices are ring positions; for AllReduce they only have to agree
// between ranks, so no mapping back to ranks is needed.
ncclResult_t ringAllReduce(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  const int n = b.nranks();
  const size_t esz = typeSize(t.dtype);
  const size_t roundElems = ringChunkElems(b, d.proto, esz) * static_cast<size_t>(n);
  const char* src = static_cast<const char*>(t.sendbuff);
  char* dst = static_cast<char*>(t.recvbuff);
  for (int ch = 0; ch < d.nchannels; ++ch) {
    sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, alignElems(esz));
    if (range.count == 0) continue;
    RingCtx c(t);
    CHORUS_CHECK(channelCtx(b, d.proto, ch, &c));
    for (size_t off = 0; off < range.count; off += roundElems) {
      const size_t roundCount = std::min(roundElems, range.count - off);
      for (int step = 0; step < sched::ringAllReduceSteps(n); ++step) {
        sched::RingStep rs = sched::ringAllReduceStep(c.pos, n, step);
        sched::Range chunk = sched::splitEven(roundCount, n, rs.chunk);
        const size_t e = range.begin + off + chunk.begin;
        c.lane->steps.push_back(ringStep(c, rs.action, src + e * esz, dst + e * esz, chunk.count));
      }
    }
  }
  return ncclSuccess;
}

// AllGather / ReduceScatter: chunk k of a round is the round's slice of the
// block of the rank at ring position k, so rounds walk the per-rank count and
// every step moves one slice.
ncclResult_t ringBlockwise(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  const int n = b.nranks();
  const size_t esz = typeSize(t.dtype);
  const size_t slice = ringChunkElems(b, d.proto, esz);
  const bool gather = t.type == CollType::AllGather;
  const char* src = static_cast<const char*>(t.sendbuff);
  char* dst = static_cast<char*>(t.recvbuff);
  const int steps = gather ? sched::ringAllGatherSteps(n) : sched::ringReduceScatterSteps(n);
  for (int ch = 0; ch < d.nchannels; ++ch) {
    sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, alignElems(esz));
    if (range.count == 0) continue;
    RingCtx c(t);
    CHORUS_CHECK(channelCtx(b, d.proto, ch, &c));
    for (size_t off = 0; off < range.count; off += slice) {
      const size_t cnt = std::min(slice, range.count - off);
      const size_t e = range.begin + off;
      for (int step = 0; step < steps; ++step) {
        sched::RingStep rs =
            gather ? sched::ringAllGatherStep(c.pos, n, step) : sched::ringReduceScatterStep(c.pos, n, step);
        const size_t blockOff = static_cast<size_t>(c.ring.at(rs.chunk)) * t.count + e;
        if (gather)
          c.lane->steps.push_back(ringStep(c, rs.action, src + e * esz, dst + blockOff * esz, cnt));
        else
          c.lane->steps.push_back(ringStep(c, rs.action, src + blockOff * esz, dst + e * esz, cnt));
      }
    }
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
  const char* src = static_cast<const char*>(t.sendbuff);
  char* dst = static_cast<char*>(t.recvbuff);
  for (int ch = 0; ch < d.nchannels; ++ch) {
    sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, alignElems(esz));
    if (range.count == 0) continue;
    RingCtx c(t);
    c.ring = b.ringOrder(ch);
    c.pos = c.ring.positionOf(b.rank());
    const int rootPos = c.ring.positionOf(t.root);
    const RingAction action =
        bcast ? sched::ringBroadcastAction(c.pos, rootPos, n) : sched::ringReduceAction(c.pos, rootPos, n);
    c.lane = &b.lane(ConnClass::Ring, d.proto, ch);
    const int chainPos = sched::chainPosition(c.pos, rootPos, n);
    // The chain's ends have one neighbour only; connect just what is used.
    const bool hasPrev = bcast ? chainPos != 0 : chainPos != 1;
    const bool hasNext = bcast ? chainPos != n - 1 : chainPos != 0;
    if (hasPrev)
      CHORUS_CHECK(b.recvFrom(ConnClass::Ring, d.proto, ch, c.ring.at(sched::ringPrev(c.pos, n)), &c.recv));
    if (hasNext) CHORUS_CHECK(b.sendTo(ConnClass::Ring, d.proto, ch, c.ring.at(sched::ringNext(c.pos, n)), &c.send));
    const size_t e = range.begin;
    c.lane->steps.push_back(
        ringStep(c, action, src ? src + e * esz : nullptr, dst ? dst + e * esz : nullptr, range.count));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t expandRing(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  switch (t.type) {
    case CollType::AllReduce: return ringAllReduce(b, t, d);
    case CollType::AllGather:
    case CollType::ReduceScatter: return ringBlockwise(b, t, d);
    case CollType::Broadcast:
    case CollType::Reduce: return ringChain(b, t, d);
    default: return fail(ncclInternalError, "ring schedule requested for %s", collName(t.type));
  }
}

}  // namespace chorus
