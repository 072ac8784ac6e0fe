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

bool sendPiece(const PieceCtx& c, const host::WirePiece& w) {
  SendConnector* out = c.plan.conns[c.seg.conn[1]].send;
  if (!out->ready()) return false;
  const sched::StepDesc& d = c.lane.active.desc;
  float* residual = c.task.wire.residual ? c.task.wire.residual + d.srcOff : nullptr;
  const uint32_t bytes = host::wireSend(w, static_cast<const char*>(c.seg.src) + d.srcOff * elemBytes(w), residual,
                                        reinterpret_cast<uint8_t*>(out->slot()));
  out->post(bytes, c.lane.active.stamp->mine);
  return true;
}

bool gatherPiece(const PieceCtx& c, const host::WirePiece& w) {
  RecvConnector* in = c.plan.conns[c.seg.conn[0]].recv;
  const uint64_t bytes = wire::encodedBytes(w.format, uint32_t(elemBytes(w)), w.n);
  if (checkReceive(c.plan, c.lane, in, bytes, c.err) != Slot::Ok) return false;
  host::wireGather(w, reinterpret_cast<const uint8_t*>(in->slot()),
                   static_cast<char*>(c.seg.dst) + c.lane.active.desc.dstOff * elemBytes(w));
  in->release();
  return true;
}

bool ownerPiece(const PieceCtx& c, const host::WirePiece& w) {
  const int n = c.seg.nranks, self = c.seg.pos;
  const int32_t* table = c.plan.rankTable.data() + c.seg.ringTable;
  const uint64_t inBytes = wire::encodedBytes(w.format, wireScatterElemBytes(c.task), w.n);
  thread_local std::vector<const uint8_t*> in;
  in.assign(static_cast<size_t>(n), nullptr);
  SendConnector* firstOut = nullptr;
  for (int r = 0; r < n; ++r) {
    if (table[r] != sched::kNoConn) {
      RecvConnector* rc = c.plan.conns[table[r]].recv;
      if (checkReceive(c.plan, c.lane, rc, inBytes, c.err) != Slot::Ok) return false;
      in[static_cast<size_t>(r)] = reinterpret_cast<const uint8_t*>(rc->slot());
    }
    if (table[n + r] != sched::kNoConn) {
      SendConnector* sc = c.plan.conns[table[n + r]].send;
      if (!sc->ready()) return false;
      if (firstOut == nullptr) firstOut = sc;
    }
  }
  const sched::StepDesc& d = c.lane.active.desc;
  float* residual = c.task.wire.residual ? c.task.wire.residual + d.srcOff : nullptr;
  uint8_t* out = firstOut ? reinterpret_cast<uint8_t*>(firstOut->slot()) : nullptr;
  const size_t eb = elemBytes(w);
  const uint32_t bytes =
      host::wireOwn(w, host::WireOwnerIo{n, self, in.data(), static_cast<const char*>(c.seg.src) + d.srcOff * eb,
                                         residual, static_cast<char*>(c.seg.dst) + d.dstOff * eb, out});
  for (int r = 0; r < n; ++r) {
    if (table[n + r] != sched::kNoConn) {
      SendConnector* sc = c.plan.conns[table[n + r]].send;
      if (sc != firstOut) std::memcpy(sc->slot(), out, bytes);
      sc->post(bytes, c.lane.active.stamp->mine);
    }
    if (table[r] != sched::kNoConn) c.plan.conns[table[r]].recv->release();
  }
  return true;
}

bool runPiece(const PieceCtx& c) {
  const host::WirePiece w{wireFormat(c.task), c.task.dtype,        c.task.spec.kind,
                          c.task.spec.scalar, c.task.spec.divisor, c.lane.active.desc.count};
  switch (c.seg.kind) {
    case sched::SegmentKind::WireSend:
      return sendPiece(c, w);
    case sched::SegmentKind::WireGather:
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
