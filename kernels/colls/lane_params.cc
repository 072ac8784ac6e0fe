// Host side of a lane launch: checks a LaneLaunch against what the kernel
// can hold and relies on, and packs it into the kernel's parameter block.
// The kernel trusts every index it reads, so a bad plan is refused here.
#include <cstring>

#include "core/wire_support.h"
#include "kernels/common/ll_lines.h"
#include "kernels/launch.h"

namespace chorus::dev {
namespace {

bool fifoIndexValid(int32_t idx, int nFifos) { return idx >= 0 && idx < nFifos; }

// The launch's (type, reduction) has the wire format: the native format for
// all, compressed ones where wireCompresses says so.
bool wireFormatValid(const LaneLaunch& a) {
  if (a.wireFormat == 0) return true;
  return a.wireFormat < wire::kNumFormats && wireCompresses(a.type, a.kind);
}

// Entries [from, to) of a wire segment's table name fifos or none; at least
// one when `needOne`.
bool tableFifosValid(const int32_t* table, int from, int to, int nFifos, bool needOne) {
  bool any = false;
  for (int e = from; e < to; ++e) {
    if (table[e] == sched::kNoConn) continue;
    if (!fifoIndexValid(table[e], nFifos)) return false;
    any = true;
  }
  return any || !needOne;
}

// A wire segment (wire_kernel.cuh): the connectors and the table its kind
// uses, in range.
bool wireSegmentValid(const sched::Segment& s, const LaneLaunch& a) {
  const int n = s.nranks;
  if (n < 1 || n > kWireMaxRanks || s.roundElems == 0) return false;
  switch (s.kind) {
    case sched::SegmentKind::WireSend:
    case sched::SegmentKind::WirePartial:
      return s.conn[1] != sched::kNoConn && (s.src != nullptr || s.count == 0);
    case sched::SegmentKind::WireGather:
      return s.conn[0] != sched::kNoConn && (s.dst != nullptr || s.count == 0);
    case sched::SegmentKind::WireRelay:
      if (s.conn[0] == sched::kNoConn || s.ringTable < 0 || s.ringTable + 2 * n > a.nRankTable) return false;
      if (s.dst == nullptr && s.count > 0) return false;
      return tableFifosValid(a.rankTable + s.ringTable, n, 2 * n, a.nFifos, false);
    default: {  // the combines: WireOwner, WireHostSum, WireChain
      if (s.ringTable < 0 || s.ringTable + 3 * n > a.nRankTable || s.pos < -1 || s.pos >= n) return false;
      // The owner writes its output; a combine with its own input (pos) reads it.
      const bool writes = s.kind == sched::SegmentKind::WireOwner;
      if (s.count > 0 && ((writes && s.dst == nullptr) || (s.pos >= 0 && s.src == nullptr))) return false;
      const int32_t* table = a.rankTable + s.ringTable;
      const bool mustSend = s.kind != sched::SegmentKind::WireOwner;
      return tableFifosValid(table, 0, n, a.nFifos, false) && tableFifosValid(table, n, 2 * n, a.nFifos, mustSend);
    }
  }
}

// Every connector id a segment's steps can name is a valid fifo index, and
// its kind's parameters keep the generated steps in range.
bool segmentValid(const sched::Segment& s, const LaneLaunch& a) {
  const int nFifos = a.nFifos, nRankTable = a.nRankTable;
  if (a.nTasks > 0 && s.task >= a.nTasks) return false;
  for (int16_t c : s.conn)
    if (c != sched::kNoConn && !fifoIndexValid(c, nFifos)) return false;
  // A wire launch runs wire segments only, with the wire kernel; the lane kernel none.
  if (sched::isWireKind(s.kind) != a.wire) return false;
  switch (s.kind) {
    case sched::SegmentKind::Single: {
      // Without a local output the result goes to the first send slot.
      const bool hasDst = (s.flags & sched::kSegHasDst) != 0, sends = s.conn[2] != sched::kNoConn;
      if (!hasDst && !sends && s.count > 0) return false;
      if (s.conn[0] == sched::kNoConn && s.conn[1] != sched::kNoConn) return false;
      if (s.conn[2] == sched::kNoConn && s.conn[3] != sched::kNoConn) return false;
      // A zero-copy step is a plain send: one connector, a source, nothing else.
      if ((s.flags & sched::kSegDirect) != 0 &&
          (s.conn[2] == sched::kNoConn || s.conn[3] != sched::kNoConn || s.conn[0] != sched::kNoConn || hasDst ||
           (s.flags & sched::kSegHasSrc) == 0 || (s.flags & (sched::kSegPreSrc | sched::kSegPost)) != 0))
        return false;
      return true;
    }
    case sched::SegmentKind::RingAllReduce:
    case sched::SegmentKind::RingGather:
    case sched::SegmentKind::RingScatter:
    case sched::SegmentKind::DirectPair:
      // All-reduce, all-gather and reduce-scatter: both buffers are read or written.
      if (s.count > 0 && (s.src == nullptr || s.dst == nullptr)) return false;
      if (s.conn[0] == sched::kNoConn || s.conn[1] == sched::kNoConn || s.roundElems == 0) return false;
      if (s.nranks < 1 || s.pos < 0 || s.pos >= s.nranks) return false;
      if (s.ringTable >= 0 && s.ringTable + s.nranks > nRankTable) return false;
      return true;
    case sched::SegmentKind::Hier:
      if (s.count > 0 && (s.src == nullptr || s.dst == nullptr)) return false;
      if (s.roundElems == 0 || s.nranks < 1 || s.nranks2 < 1) return false;
      if (s.pos < 0 || s.pos >= s.nranks || s.pos2 < 0 || s.pos2 >= s.nranks2) return false;
      if (s.nranks > 1 &&
          (s.conn[sched::kHierScatterRecv] == sched::kNoConn || s.conn[sched::kHierScatterSend] == sched::kNoConn ||
           s.conn[sched::kHierGatherRecv] == sched::kNoConn || s.conn[sched::kHierGatherSend] == sched::kNoConn))
        return false;
      return s.nranks2 == 1 ||
             (s.conn[sched::kHierInterRecv] != sched::kNoConn && s.conn[sched::kHierInterSend] != sched::kNoConn);
    case sched::SegmentKind::WireSend:
    case sched::SegmentKind::WireOwner:
    case sched::SegmentKind::WireGather:
    case sched::SegmentKind::WirePartial:
    case sched::SegmentKind::WireHostSum:
    case sched::SegmentKind::WireRelay:
    case sched::SegmentKind::WireChain:
      return wireSegmentValid(s, a);
  }
  return false;
}

bool directOnlyInSimple(const DevLane& lane, const sched::Segment* segments) {
  if (lane.protocol == Protocol::Simple) return true;
  for (uint32_t k = 0; k < lane.nSegments; ++k)
    if ((segments[lane.firstSegment + k].flags & sched::kSegDirect) != 0) return false;
  return true;
}

// Every piece of the lane fits each slot of the connectors its (lane-kernel)
// segments name: a Simple piece the slot, an LL piece's lines
// (step::llLineBytes: 8 bytes per started 4). Wire segments size their own
// pieces (checked when translated).
bool piecesFitSlots(const DevLane& lane, const LaneLaunch& a) {
  const uint64_t needs = lane.protocol == Protocol::LL ? step::llLineBytes(lane.pieceBytes) : lane.pieceBytes;
  for (uint32_t k = 0; k < lane.nSegments; ++k) {
    const sched::Segment& s = a.segments[lane.firstSegment + k];
    if (sched::isWireKind(s.kind)) continue;
    for (int16_t c : s.conn)
      if (c != sched::kNoConn && needs > a.fifos[c].slotBytes) return false;
  }
  return true;
}

bool laneValid(const DevLane& lane, int nSegments, size_t elemBytes) {
  if (lane.firstSegment > static_cast<uint32_t>(nSegments) ||
      lane.nSegments > static_cast<uint32_t>(nSegments) - lane.firstSegment)
    return false;
  if (lane.protocol == Protocol::LL && lane.pieceBytes > kLLMaxPieceBytes) return false;
  return lane.pieceBytes >= elemBytes || lane.nSegments == 0;
}

bool fifoValid(const DevFifo& f, int nLanes) {
  if (f.drainBy < -1 || f.drainBy >= nLanes) return false;
  // sizes[] and the fingerprints are indexed by position % nslots.
  return f.tail != nullptr && f.head != nullptr && f.sizes != nullptr && f.slots != nullptr && f.position != nullptr &&
         f.nslots != 0 && f.nslots <= kMaxFifoSlots && f.slotBytes != 0;
}

bool countsValid(const LaneLaunch& a) {
  if (a.threads <= 0 || a.threads > 512 || a.threads % 32 != 0) return false;
  if (a.nLanes < 0 || a.nLanes > kLaunchMaxLanes || a.nFifos < 0 || a.nFifos > kLaunchMaxFifos || a.nSegments < 0 ||
      a.nSegments > kLaunchMaxSegments || a.nRankTable < 0 || a.nRankTable > kLaunchMaxRankTable || a.nTasks < 0 ||
      a.nTasks > kLaunchMaxTasks)
    return false;
  if (a.nTasks > 0 && a.prints == nullptr) return false;
  return !((a.nLanes > 0 && a.lanes == nullptr) || (a.nSegments > 0 && a.segments == nullptr) ||
           (a.nFifos > 0 && a.fifos == nullptr) || (a.nRankTable > 0 && a.rankTable == nullptr));
}

template <typename E>
void copyArray(E* to, const E* from, int n) {
  if (n > 0) std::memcpy(to, from, sizeof(E) * static_cast<size_t>(n));
}

}  // namespace

cudaError_t packLaneParams(const LaneLaunch& args, size_t elemBytes, LaneParams* params) {
  if (!countsValid(args) || !wireFormatValid(args)) return cudaErrorInvalidValue;
  for (int i = 0; i < args.nSegments; ++i)
    if (!segmentValid(args.segments[i], args)) return cudaErrorInvalidValue;
  for (int i = 0; i < args.nLanes; ++i)
    if (!laneValid(args.lanes[i], args.nSegments, elemBytes) || !directOnlyInSimple(args.lanes[i], args.segments) ||
        !piecesFitSlots(args.lanes[i], args))
      return cudaErrorInvalidValue;
  for (int i = 0; i < args.nFifos; ++i)
    if (!fifoValid(args.fifos[i], args.nLanes)) return cudaErrorInvalidValue;
  params->L = args;
  params->L.lanes = nullptr;
  params->L.segments = nullptr;
  params->L.fifos = nullptr;
  params->L.rankTable = nullptr;
  params->L.prints = nullptr;
  copyArray(params->lanes, args.lanes, args.nLanes);
  copyArray(params->segments, args.segments, args.nSegments);
  copyArray(params->fifos, args.fifos, args.nFifos);
  copyArray(params->rankTable, args.rankTable, args.nRankTable);
  copyArray(params->prints, args.prints, args.nTasks);
  return cudaSuccess;
}

}  // namespace chorus::dev
