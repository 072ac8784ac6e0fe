// Where the direct reductions (plan_wire.cc) cut a task: its shards, their
// owners, and the payload sizes of the two phases. Every rank computes the
// same cuts from the call alone, so senders and owners agree on piece sizes
// without talking.
#pragma once

#include <algorithm>
#include <cstdint>

#include "enqueue/task.h"
#include "kernels/common/wire_codec.h"
#include "sched/chunking.h"
#include "sched/segment.h"

namespace chorus {

// Wire slots never shrink below this (a slot holds at least one block of
// the widest native payload, 256 x 8 bytes, with room to spare).
inline constexpr uint32_t kMinWireSlotBytes = 8192;

inline wire::Format wireFormat(const Task& t) { return static_cast<wire::Format>(t.wire.format); }

// Bytes per element of the scatter phase's payload for wire::Format::Native
// (compressed formats ignore it): wire_reduce.h's nativeScatterBytes<T>.
// The gather phase carries the element type, never wider, so a piece sized
// for the scatter phase fits a slot in both.
inline uint32_t wireScatterElemBytes(const Task& t) {
  const uint32_t esz = static_cast<uint32_t>(typeSize(t.dtype));
  const bool narrowFloat =
      t.dtype == ncclFloat16 || t.dtype == ncclBfloat16 || t.dtype == ncclFloat8e4m3 || t.dtype == ncclFloat8e5m2;
  if (t.spec.kind != ReduceKind::PreMulSum || !narrowFloat) return esz;
  return 4;  // the compute type (reduce_ops.h's ComputeOf): fp32 for the narrow floats
}

// Bytes per element of a partial in the compute type (wire_reduce.h's
// computePartialBytes): fp32 for float and the narrow floats, the type itself
// otherwise.
inline uint32_t wireComputeBytes(const Task& t) {
  const bool floatComputed = t.dtype == ncclFloat32 || t.dtype == ncclFloat16 || t.dtype == ncclBfloat16 ||
                             t.dtype == ncclFloat8e4m3 || t.dtype == ncclFloat8e5m2;
  return floatComputed ? 4 : static_cast<uint32_t>(typeSize(t.dtype));
}

// The most bytes a piece of n elements of a wire segment puts into, or reads
// from, one slot (docs/wire.md): encodings of the scatter phase (senders, the
// combines' encoded inputs), of the gather phase (the owner's result,
// gatherers, relays), partials in the compute type (WirePartial, the chain's
// output, and a combine's inputs when `partialIn`: some input arrives as a
// partial), and the host sum's encoding of fp32 values. Plans size pieces so
// that what a segment moves fits its slots; the GPU translation checks it.
inline uint64_t wireSlotBytes(const Task& t, sched::SegmentKind kind, bool partialIn, uint64_t n) {
  const wire::Format f = wireFormat(t);
  const uint64_t scatter = wire::encodedBytes(f, wireScatterElemBytes(t), n);
  const uint64_t gather = wire::encodedBytes(f, static_cast<uint32_t>(typeSize(t.dtype)), n);
  const uint64_t partial = uint64_t(wireComputeBytes(t)) * n;
  const uint64_t combineIn = std::max(scatter, partialIn ? partial : 0);
  switch (kind) {
    case sched::SegmentKind::WireSend:
      return scatter;
    case sched::SegmentKind::WirePartial:
      return partial;
    case sched::SegmentKind::WireGather:
    case sched::SegmentKind::WireRelay:
      return gather;
    case sched::SegmentKind::WireOwner:
      return std::max(combineIn, gather);
    case sched::SegmentKind::WireHostSum:
      return std::max(combineIn, wire::encodedBytes(f, wireComputeBytes(t), n));
    default:  // WireChain
      return std::max(combineIn, partial);
  }
}

struct WireGeometry {
  uint64_t pieceElems = 0;  // elements per step: whole blocks filling one slot
};

inline WireGeometry wireGeometry(const Task& t, int /*nranks*/, uint32_t slotBytes) {
  WireGeometry g;
  g.pieceElems = wire::pieceElemsFor(wireFormat(t), wireScatterElemBytes(t), slotBytes);
  return g;
}

// Shard of owner q: elements [srcBegin, srcBegin + count) of every rank's
// input, reduced into [dstBegin, dstBegin + count) of the owner's output
// (and, for AllReduce, of everyone's).
struct WireShard {
  uint64_t srcBegin = 0;
  uint64_t dstBegin = 0;
  uint64_t count = 0;
};

inline WireShard wireShard(const Task& t, int nranks, int q) {
  WireShard s;
  switch (t.type) {
    case CollType::ReduceScatter:
      s.srcBegin = static_cast<uint64_t>(q) * t.count;
      s.count = t.count;
      break;
    case CollType::Reduce:
      s.count = q == t.root ? t.count : 0;
      break;
    default: {  // AllReduce: whole blocks per owner
      const sched::Range r = sched::splitAligned(t.count, nranks, q, wire::kWireBlockElems);
      s.srcBegin = s.dstBegin = r.begin;
      s.count = r.count;
    }
  }
  return s;
}

}  // namespace chorus
