// One piece of a direct reduction's step (plan_wire.cc, docs/wire.md) on a
// CPU thread. The arithmetic is kernels/common/wire_reduce.h's, block by
// block, straight between the user's buffers and the connector slots (no
// pass over the buffer of its own); what is here is waiting for the
// connectors and walking the blocks of a piece.
#include "host/wire_exec.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/comm.h"
#include "host/host_reduce_kernels.h"
#include "kernels/common/step_rules.h"
#include "kernels/common/wire_reduce.h"
#include "plan/lane_failure.h"
#include "plan/wire_geometry.h"

namespace chorus {
namespace {

using wire::Format;
using wire::kWireBlockElems;

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

// The typed work of one piece; T is the task's element type, Fn its functor.
template <typename T, typename Fn>
struct PieceWork {
  const Task& task;
  const Fn& fn;
  Format format;
  bool preMul;
  uint64_t n;  // elements of the piece

  uint32_t blockAt(uint64_t i) const { return static_cast<uint32_t>(std::min<uint64_t>(kWireBlockElems, n - i)); }

  uint32_t send(const T* x, float* residual, uint8_t* out) const {
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < n; i += kWireBlockElems)
      bytes += wire::sendBlock(format, fn, preMul, x + i, residual ? residual + i : nullptr, blockAt(i), out + bytes);
    return bytes;
  }

  uint32_t gather(const uint8_t* in, T* y) const {
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < n; i += kWireBlockElems) bytes += wire::gatherBlock(format, in + bytes, blockAt(i), y + i);
    return bytes;
  }

  // `in[r]`: rank r's slot (null for self); advanced block by block.
  uint32_t own(int nranks, int self, std::vector<const uint8_t*>& in, const T* x, float* residual, T* y,
               uint8_t* out) const {
    const uint64_t inBlock = wire::encodedBytes(format, wire::nativeScatterBytes<T>(preMul), kWireBlockElems);
    wire::OwnerBlock<T> b{format,
                          preMul,
                          task.spec.kind == ReduceKind::SumPostDiv,
                          nranks,
                          self,
                          in.data(),
                          nullptr,
                          nullptr,
                          0,
                          nullptr,
                          nullptr,
                          0,
                          task.spec.kind == ReduceKind::SumPostDiv ? float(task.spec.divisor) : 1.0f};
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < n; i += kWireBlockElems) {
      b.x = x + i;
      b.residual = residual ? residual + i : nullptr;
      b.n = blockAt(i);
      b.y = y + i;
      b.out = out ? out + bytes : nullptr;
      wire::ownerBlock(b, fn);
      bytes += b.outBytes;
      for (int r = 0; r < nranks; ++r)
        if (in[static_cast<size_t>(r)]) in[static_cast<size_t>(r)] += inBlock;
    }
    return bytes;
  }
};

struct PieceCtx {
  const Plan& plan;
  Lane& lane;
  const sched::Segment& seg;
  const Task& task;
  ncclResult_t* err;
};

template <typename T, typename Fn>
bool sendPiece(const PieceCtx& c, const PieceWork<T, Fn>& w) {
  SendConnector* out = c.plan.conns[c.seg.conn[1]].send;
  if (!out->ready()) return false;
  const sched::StepDesc& d = c.lane.active.desc;
  float* residual = c.task.wire.residual ? c.task.wire.residual + d.srcOff : nullptr;
  const uint32_t bytes =
      w.send(static_cast<const T*>(c.seg.src) + d.srcOff, residual, reinterpret_cast<uint8_t*>(out->slot()));
  out->post(bytes, c.lane.active.stamp->mine);
  return true;
}

template <typename T, typename Fn>
bool gatherPiece(const PieceCtx& c, const PieceWork<T, Fn>& w) {
  RecvConnector* in = c.plan.conns[c.seg.conn[0]].recv;
  const uint64_t bytes = wire::encodedBytes(w.format, uint32_t(sizeof(T)), w.n);
  if (checkReceive(c.plan, c.lane, in, bytes, c.err) != Slot::Ok) return false;
  w.gather(reinterpret_cast<const uint8_t*>(in->slot()), static_cast<T*>(c.seg.dst) + c.lane.active.desc.dstOff);
  in->release();
  return true;
}

template <typename T, typename Fn>
bool ownerPiece(const PieceCtx& c, const PieceWork<T, Fn>& w) {
  const int n = c.seg.nranks, self = c.seg.pos;
  const int32_t* table = c.plan.rankTable.data() + c.seg.ringTable;
  const uint64_t inBytes = wire::encodedBytes(w.format, wire::nativeScatterBytes<T>(w.preMul), w.n);
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
  const uint32_t bytes = w.own(n, self, in, static_cast<const T*>(c.seg.src) + d.srcOff, residual,
                               static_cast<T*>(c.seg.dst) + d.dstOff, out);
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

template <typename T, typename Fn>
bool runPiece(const PieceCtx& c, const Fn& fn) {
  const PieceWork<T, Fn> w{c.task, fn, wireFormat(c.task), c.task.spec.kind == ReduceKind::PreMulSum,
                           c.lane.active.desc.count};
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
  const host::detail::KernelArgs args{task.spec.scalar, task.spec.divisor};
  const bool moved = host::detail::dispatchType(task.dtype, [&](auto tt) {
    using T = typename decltype(tt)::type;
    return host::detail::dispatchKind(task.spec.kind, [&](auto kt) {
      const auto fn = host::detail::makeFunc<T, decltype(kt)::value>(args);
      return runPiece<T>(c, fn);
    });
  });
  if (moved) lane.done = lane.active.desc.count;
  return moved;
}

}  // namespace chorus
