// One piece of a direct reduction's step (plan_wire.cc, docs/wire.md) on a
// CPU thread. The arithmetic is kernels/common/wire_reduce.h's, block by
// block, straight between the user's buffers and the connector slots (no
// pass over the buffer of its own), through wire_blocks.h's loops; what is
// here is waiting for the connectors and handing them the piece.
#include "host/wire_exec.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/comm.h"
#include "host/wire_blocks.h"
#include "kernels/common/step_rules.h"
#include "kernels/common/wire_reduce.h"
#include "plan/lane_failure.h"
#include "plan/wire_geometry.h"

namespace chorus {
namespace {

// Bytes per element of the task's type.
size_t elemBytes(const host::WirePiece& w) { return typeSize(w.type); }

int rankOf(const Plan& plan) { return plan.comm ? plan.comm->id.rank : -1; }
int laneIndex(const Plan& plan, const Lane& lane) { return static_cast<int>(&lane - plan.lanes.data()); }

// Whether a receive slot holds the expected piece of `bytes`; on a mismatch
// sets *err (the same records as step_exec.cc's checks).
enum class Slot { NotYet, Ok, Failed };
Slot checkReceive(const Plan& plan, const Lane& lane, RecvConnector* in, uint64_t bytes, ncclResult_t* err) {
  if (!in->ready()) return Slot::NotYet;
  const OpStamp& stamp = *lane.active.stamp;
  if (!step::printMatches(in->print(), stamp.expect)) {
    const step::LaneFailure f =
        step::opMismatch(laneIndex(plan, lane), rankOf(plan), in->end().peer, stamp.mine, in->print());
    spreadMismatch(plan, f.mismatch);
    *err = laneFailureError(f, rankOf(plan), 0);
    return Slot::Failed;
  }
  if (in->size() != bytes) {
    *err = laneFailureError(
        step::sizeMismatch(laneIndex(plan, lane), in->end().peer, in->size(), static_cast<uint32_t>(bytes)),
        rankOf(plan), 0);
    return Slot::Failed;
  }
  return Slot::Ok;
}

struct PieceCtx {
  const Plan& plan;
  Lane& lane;
  const sched::Segment& seg;
  const Task& task;
  ncclResult_t* err;
};

// WireSend (encoded) or WirePartial (fp32, for this host's combining rank).
bool sendPiece(const PieceCtx& c, const host::WirePiece& w) {
  SendConnector* out = c.plan.conns[c.seg.conn[1]].send;
  if (!out->ready()) return false;
  const sched::StepDesc& d = c.lane.active.desc;
  float* residual = c.task.wire.residual ? c.task.wire.residual + d.srcOff : nullptr;
  const void* x = static_cast<const char*>(c.seg.src) + d.srcOff * elemBytes(w);
  auto* slot = reinterpret_cast<uint8_t*>(out->slot());
  const uint32_t bytes = c.seg.kind == sched::SegmentKind::WirePartial ? host::wirePartial(w, x, residual, slot)
                                                                       : host::wireSend(w, x, residual, slot);
  out->post(bytes, c.lane.active.stamp->mine);
  return true;
}

// The connectors that pass a result on (entries n..2n-1 of the segment's
// table), once all of them have room; the first of them, or null.
bool resultOutsReady(const PieceCtx& c, const int32_t* outs, SendConnector** first) {
  *first = nullptr;
  for (int r = 0; r < c.seg.nranks; ++r) {
    if (outs[r] == sched::kNoConn) continue;
    SendConnector* sc = c.plan.conns[outs[r]].send;
    if (!sc->ready()) return false;
    if (*first == nullptr) *first = sc;
  }
  return true;
}

// Posts `bytes` of `first`'s slot on every connector of `outs` (copied
// before `first` posts it: its slot() then moves on).
void postResult(const PieceCtx& c, const int32_t* outs, SendConnector* first, uint32_t bytes) {
  const void* encoded = first->slot();
  for (int r = 0; r < c.seg.nranks; ++r) {
    if (outs[r] == sched::kNoConn) continue;
    SendConnector* sc = c.plan.conns[outs[r]].send;
    if (sc != first) std::memcpy(sc->slot(), encoded, bytes);
    sc->post(bytes, c.lane.active.stamp->mine);
  }
}

// WireGather, or WireRelay (which also passes the encoding on).
bool gatherPiece(const PieceCtx& c, const host::WirePiece& w) {
  RecvConnector* in = c.plan.conns[c.seg.conn[0]].recv;
  const uint64_t bytes = wire::encodedBytes(w.format, uint32_t(elemBytes(w)), w.n);
  if (checkReceive(c.plan, c.lane, in, bytes, c.err) != Slot::Ok) return false;
  const bool relays = c.seg.kind == sched::SegmentKind::WireRelay;
  const int32_t* outs = relays ? c.plan.rankTable.data() + c.seg.ringTable + c.seg.nranks : nullptr;
  SendConnector* first = nullptr;
  if (relays && !resultOutsReady(c, outs, &first)) return false;
  const auto* slot = reinterpret_cast<const uint8_t*>(in->slot());
  host::wireGather(w, slot, static_cast<char*>(c.seg.dst) + c.lane.active.desc.dstOff * elemBytes(w));
  if (first) {
    std::memcpy(first->slot(), slot, bytes);
    postResult(c, outs, first, static_cast<uint32_t>(bytes));
  }
  in->release();
  return true;
}

// WireOwner (the shard's result, encoded for every gatherer), WireHostSum
// (the host's contribution, encoded for the owner) or WireChain (the partial
// of every rank up to this host's, for the next host).
bool ownerPiece(const PieceCtx& c, const host::WirePiece& w) {
  const int n = c.seg.nranks, self = c.seg.pos;
  const int32_t* table = c.plan.rankTable.data() + c.seg.ringTable;
  const uint64_t encoded = wire::encodedBytes(w.format, wireScatterElemBytes(c.task), w.n);
  const uint64_t partialBytes = uint64_t(wireComputeBytes(c.task)) * w.n;
  thread_local std::vector<const uint8_t*> in;
  thread_local std::vector<uint8_t> partial;
  in.assign(static_cast<size_t>(n), nullptr);
  partial.assign(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    if (table[r] == sched::kNoConn) continue;
    partial[static_cast<size_t>(r)] = table[2 * n + r] != 0 ? 1 : 0;
    RecvConnector* rc = c.plan.conns[table[r]].recv;
    if (checkReceive(c.plan, c.lane, rc, partial[static_cast<size_t>(r)] ? partialBytes : encoded, c.err) != Slot::Ok)
      return false;
    in[static_cast<size_t>(r)] = reinterpret_cast<const uint8_t*>(rc->slot());
  }
  SendConnector* first = nullptr;
  if (!resultOutsReady(c, table + n, &first)) return false;
  const sched::StepDesc& d = c.lane.active.desc;
  float* residual = c.task.wire.residual ? c.task.wire.residual + d.srcOff : nullptr;
  uint8_t* out = first ? reinterpret_cast<uint8_t*>(first->slot()) : nullptr;
  const size_t eb = elemBytes(w);
  void* y = d.dstOff == sched::kNoBuffer ? nullptr : static_cast<char*>(c.seg.dst) + d.dstOff * eb;
  const host::WireOwnerIo io{
      n, self, in.data(), partial.data(), static_cast<const char*>(c.seg.src) + d.srcOff * eb, residual, y, out};
  uint32_t bytes = 0;
  if (c.seg.kind == sched::SegmentKind::WireHostSum)
    bytes = host::wireHostSum(w, io);
  else if (c.seg.kind == sched::SegmentKind::WireChain)
    bytes = host::wireChain(w, io);
  else
    bytes = host::wireOwn(w, io);
  if (first) postResult(c, table + n, first, bytes);
  for (int r = 0; r < n; ++r)
    if (table[r] != sched::kNoConn) c.plan.conns[table[r]].recv->release();
  return true;
}

bool runPiece(const PieceCtx& c) {
  const host::WirePiece w{wireFormat(c.task), c.task.dtype,        c.task.spec.kind,
                          c.task.spec.scalar, c.task.spec.divisor, c.lane.active.desc.count};
  switch (c.seg.kind) {
    case sched::SegmentKind::WireSend:
    case sched::SegmentKind::WirePartial:
      return sendPiece(c, w);
    case sched::SegmentKind::WireGather:
    case sched::SegmentKind::WireRelay:
      return gatherPiece(c, w);
    default:
      return ownerPiece(c, w);
  }
}

}  // namespace

bool progressWireLane(const Plan& plan, Lane& lane, ncclResult_t* err) {
  const sched::Segment& seg = lane.segments[lane.seg];
  const Task& task = plan.tasks[seg.task];
  const PieceCtx c{plan, lane, seg, task, err};
  const bool moved = runPiece(c);
  if (moved) lane.done = lane.active.desc.count;
  return moved;
}

}  // namespace chorus
