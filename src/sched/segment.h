// Compact plans: a lane's work as a few segments, each of which generates its
// steps on demand. A segment is "ring all-reduce of this channel's element
// range at ring position p", "tree reduce-up of this half", "send this buffer
// to peer q": a fixed-size record whatever the message size, so a 16 GiB
// all-reduce is as small a plan as a 1 KiB one, and one kernel launch runs it.
//
// segmentSteps() says how many steps a segment has; segmentStep() computes
// step i. Both executors call these same functions (the host executor in
// progressLane(), the lane kernel on the device), so they cut the data at the
// same places and combine the same operands in the same order: that is what
// makes host and GPU results bit-identical, and what lets host-mode tests
// exercise every decision the kernel makes.
//
// Everything here is index arithmetic on 64-bit element counts; nothing
// depends on the executor, the transport or CUDA.
#pragma once

#include "sched/ring.h"

namespace chorus::sched {

enum class SegmentKind : uint8_t {
  Single,         // one explicit step (tree halves, chains, point-to-point, local copies)
  RingAllReduce,  // rounds of the 2n-1 ring all-reduce steps
  RingGather,     // rounds of the n all-gather steps; chunk k is the block of the rank at ring position k
  RingScatter,    // rounds of the n reduce-scatter steps, blocks as for RingGather
  DirectPair,     // one pairwise exchange of an all-reduce (2 ranks, or a round of recursive
                  // doubling): per chunk, send it, then reduce the peer's
  Hier,           // per round: local reduce-scatter, inter-host all-reduce, local all-gather
  // The direct reductions of docs/wire.md (compressed wires, deterministic
  // mode); one step per piece of a shard, a piece being whole wire blocks:
  WireSend,    // encode this rank's contribution to peer `pos`'s shard, send it
  WireOwner,   // reduce this rank's shard in rank order; encode and send the result to every peer
  WireGather,  // receive peer `pos`'s reduced shard, decode it into the output
  // The two-level form across hosts (compressed wires only):
  WirePartial,  // send this rank's contribution to peer `pos`'s shard, fp32, to the host rank combining it
  WireHostSum,  // combine the host's partials for peer `pos`'s shard with this rank's, encode, send to `pos`
  WireRelay,    // receive peer `pos`'s reduced shard, decode it, pass the encoding on to this host's ranks
  // The chain across hosts of deterministic mode (plan_wire_chain.cc):
  WireChain,  // combine the previous host's partial and this host's contributions in rank order, send the
              // unrounded partial (compute type) on to the next host
};

CHORUS_SCHED_FN bool isWireKind(SegmentKind k) {
  return k == SegmentKind::WireSend || k == SegmentKind::WireOwner || k == SegmentKind::WireGather ||
         k == SegmentKind::WirePartial || k == SegmentKind::WireHostSum || k == SegmentKind::WireRelay ||
         k == SegmentKind::WireChain;
}

// Wire kinds that read this rank's input.
CHORUS_SCHED_FN bool wireReadsInput(SegmentKind k) {
  return k == SegmentKind::WireSend || k == SegmentKind::WireOwner || k == SegmentKind::WirePartial ||
         k == SegmentKind::WireHostSum || k == SegmentKind::WireChain;
}

CHORUS_SCHED_FN const char* segmentKindName(SegmentKind k) {
  switch (k) {
    case SegmentKind::Single:
      return "single";
    case SegmentKind::RingAllReduce:
      return "ring-allreduce";
    case SegmentKind::RingGather:
      return "ring-allgather";
    case SegmentKind::RingScatter:
      return "ring-scatter";
    case SegmentKind::DirectPair:
      return "direct-pair";
    case SegmentKind::Hier:
      return "hier";
    case SegmentKind::WireSend:
      return "wire-send";
    case SegmentKind::WireOwner:
      return "wire-owner";
    case SegmentKind::WireGather:
      return "wire-gather";
    case SegmentKind::WirePartial:
      return "wire-partial";
    case SegmentKind::WireHostSum:
      return "wire-host-sum";
    case SegmentKind::WireRelay:
      return "wire-relay";
    case SegmentKind::WireChain:
      return "wire-chain";
  }
  return "?";
}

inline constexpr int16_t kNoConn = -1;
inline constexpr uint64_t kNoBuffer = ~uint64_t(0);

// Which buffer a step reads its local input from.
enum class StepInput : uint8_t { None = 0, Src = 1, Dst = 2 };

// One step, as the executors consume it: connectors (ids of the lane's
// connector table: the segment's conn[] entries), the local input and output
// as element offsets into the segment's buffers, and the combine flags.
struct StepDesc {
  int16_t recv[2] = {kNoConn, kNoConn};
  int16_t send[2] = {kNoConn, kNoConn};
  uint8_t nRecv = 0;
  uint8_t nSend = 0;
  StepInput input = StepInput::None;
  uint8_t preSrc = 0;           // apply PreMulSum's scalar to the local input
  uint8_t post = 0;             // apply SumPostDiv's division to the result
  uint8_t direct = 0;           // a plain send of a registered buffer: zero-copy where the connector allows it
  uint64_t srcOff = kNoBuffer;  // elements into the input buffer (`input`)
  uint64_t dstOff = kNoBuffer;  // elements into the segment's dst; kNoBuffer: no local output
  uint64_t count = 0;           // elements
};

// Segment::flags
inline constexpr uint8_t kSegInPlace = 1;  // the input is already where CopySend would copy it
inline constexpr uint8_t kSegPreSrc = 2;   // Single: preSrc
inline constexpr uint8_t kSegPost = 4;     // Single: post
inline constexpr uint8_t kSegDirect = 8;   // Single: zero-copy send
inline constexpr uint8_t kSegHasSrc = 16;  // Single: reads src
inline constexpr uint8_t kSegHasDst = 32;  // Single: writes dst
inline constexpr uint8_t kSegStream = 64;  // outputs are large: non-temporal stores (host)
inline constexpr uint8_t kSegBytes = 128;  // Single: moves raw bytes (begin and count in bytes, a plain copy)
// DirectPair (recursive doubling): not the first exchange: it reads the
// previous exchange's result in dst, without PreMulSum's scalar; not the
// last: no SumPostDiv. Neither set: the two-rank all-reduce.
inline constexpr uint8_t kSegPairFromDst = 2;
inline constexpr uint8_t kSegPairNotLast = 4;

// Hier: which of the segment's connectors serve each phase.
inline constexpr int kHierScatterRecv = 0, kHierScatterSend = 1, kHierInterRecv = 2, kHierInterSend = 3,
                     kHierGatherRecv = 4, kHierGatherSend = 5;

struct Segment {
  uint64_t begin = 0;       // first element of the segment's range (into src and dst)
  uint64_t count = 0;       // elements of the range (Single: of the step)
  uint64_t roundElems = 0;  // ring kinds and Hier: elements per round; DirectPair: per chunk
  uint64_t blockElems = 0;  // RingGather/RingScatter: elements of one rank's block; WireOwner: dst offset
  const void* src = nullptr;
  void* dst = nullptr;
  // Single: recv[0..1] = conn[0..1], send[0..1] = conn[2..3]. Ring kinds and
  // DirectPair: conn[0] receives, conn[1] sends. Hier: kHier* above.
  int16_t conn[6] = {kNoConn, kNoConn, kNoConn, kNoConn, kNoConn, kNoConn};
  int32_t nranks = 1;   // ring size (Hier: ranks per host)
  int32_t pos = 0;      // position on the ring (Hier: local position)
  int32_t nranks2 = 1;  // Hier: hosts
  int32_t pos2 = 0;     // Hier: position on the inter-host ring
  // RingGather/RingScatter: index into the plan's rank table of this ring's
  // order (entry p = rank at position p); -1 when position p is rank p.
  // WireOwner, WireHostSum, WireChain: index into the rank table of 3 *
  // nranks entries: entry r is the connector receiving rank r's
  // contribution, entry nranks + r the one sending the result (the host's
  // sum, the chain's partial) to rank r (kNoConn where there is none), entry
  // 2 * nranks + r is 1 where rank r's contribution arrives as a partial in
  // the compute type (the sum of several ranks' contributions, unrounded). WireRelay: 2 * nranks entries,
  // the second half the connectors passing the result on.
  int32_t ringTable = -1;
  uint16_t task = 0;  // which task of the plan (its reduction spec)
  SegmentKind kind = SegmentKind::Single;
  uint8_t flags = 0;
};

// Point-to-point data is moved, never combined, so it can travel as raw
// bytes: a send of floats may meet a receive of int32 of the same size, and
// a GPU launch of point-to-point work needs only a byte-copy kernel. The one
// conversion, for both executors: offsets and counts become bytes.
CHORUS_SCHED_FN Segment asBytes(Segment s, uint64_t elemBytes) {
  if (s.kind != SegmentKind::Single || (s.flags & kSegBytes) != 0) return s;
  s.begin *= elemBytes;
  s.count *= elemBytes;
  s.flags = static_cast<uint8_t>(s.flags | kSegBytes);
  return s;
}

// --- step arithmetic --------------------------------------------------------

// Rank counts the direct all-reduce serves (plan_direct.cc): two ranks, or
// recursive doubling over a power of two.
CHORUS_SCHED_FN bool directAllReduceRanks(int n) { return n >= 2 && (n & (n - 1)) == 0; }

CHORUS_SCHED_FN uint64_t ceilDiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// Steps of one round of each phase of a Hier segment.
CHORUS_SCHED_FN uint64_t hierRoundSteps(const Segment& s) {
  const uint64_t G = static_cast<uint64_t>(s.nranks), H = static_cast<uint64_t>(s.nranks2);
  return (G > 1 ? 2 * G : 0) + (H > 1 ? 2 * H - 1 : 0);
}

CHORUS_SCHED_FN uint64_t stepsPerRound(const Segment& s) {
  switch (s.kind) {
    case SegmentKind::RingAllReduce:
      return static_cast<uint64_t>(ringAllReduceSteps(s.nranks));
    case SegmentKind::RingGather:
    case SegmentKind::RingScatter:
      return static_cast<uint64_t>(s.nranks);
    case SegmentKind::DirectPair:
      return 2;
    case SegmentKind::Hier:
      return hierRoundSteps(s);
    default:
      return 1;
  }
}

CHORUS_SCHED_FN uint64_t segmentRounds(const Segment& s) {
  return s.kind == SegmentKind::Single ? 1 : ceilDiv(s.count, s.roundElems);
}

CHORUS_SCHED_FN uint64_t segmentSteps(const Segment& s) {
  if (s.count == 0) return 0;
  return segmentRounds(s) * stepsPerRound(s);
}

// The connectors, buffers and flags a ring action uses.
CHORUS_SCHED_FN StepDesc ringActionDesc(RingAction action, int16_t recv, int16_t send, StepInput input, uint64_t srcOff,
                                        uint64_t dstOff, uint64_t count, bool inPlace) {
  StepDesc d;
  d.count = count;
  const RingActionShape a = ringActionShape(action);
  if (a.recvs) d.recv[d.nRecv++] = recv;
  if (a.sends) d.send[d.nSend++] = send;
  if (a.readsInput) {
    d.input = input;
    d.srcOff = srcOff;
  }
  d.preSrc = a.reduces ? 1 : 0;
  if (a.keeps && !(action == RingAction::CopySend && inPlace)) d.dstOff = dstOff;
  d.post = a.divides ? 1 : 0;
  return d;
}

CHORUS_SCHED_FN StepDesc singleStep(const Segment& s) {
  StepDesc d;
  for (int i = 0; i < 2; ++i) {
    if (s.conn[i] != kNoConn) d.recv[d.nRecv++] = s.conn[i];
    if (s.conn[2 + i] != kNoConn) d.send[d.nSend++] = s.conn[2 + i];
  }
  if (s.flags & kSegHasSrc) {
    d.input = StepInput::Src;
    d.srcOff = s.begin;
  }
  if (s.flags & kSegHasDst) d.dstOff = s.begin;
  d.preSrc = (s.flags & kSegPreSrc) ? 1 : 0;
  d.post = (s.flags & kSegPost) ? 1 : 0;
  d.direct = (s.flags & kSegDirect) ? 1 : 0;
  d.count = s.count;
  return d;
}

CHORUS_SCHED_FN int32_t rankAtPosition(const int32_t* ringTable, int pos) {
  return ringTable != nullptr ? ringTable[pos] : pos;
}

CHORUS_SCHED_FN StepDesc ringAllReduceDesc(const Segment& s, uint64_t round, int k) {
  const uint64_t off = round * s.roundElems;
  const uint64_t roundCount = s.count - off < s.roundElems ? s.count - off : s.roundElems;
  const RingStep rs = ringAllReduceStep(s.pos, s.nranks, k);
  const Range chunk = splitEven(roundCount, s.nranks, rs.chunk);
  const uint64_t e = s.begin + off + chunk.begin;
  return ringActionDesc(rs.action, s.conn[0], s.conn[1], StepInput::Src, e, e, chunk.count,
                        (s.flags & kSegInPlace) != 0);
}

// AllGather / ReduceScatter: step k of a round moves the round's slice of
// the block of the rank at ring position rs.chunk.
CHORUS_SCHED_FN StepDesc ringBlockDesc(const Segment& s, const int32_t* ringTable, uint64_t round, int k) {
  const bool gather = s.kind == SegmentKind::RingGather;
  const uint64_t off = round * s.roundElems;
  const uint64_t cnt = s.count - off < s.roundElems ? s.count - off : s.roundElems;
  const uint64_t e = s.begin + off;
  const RingStep rs = gather ? ringAllGatherStep(s.pos, s.nranks, k) : ringReduceScatterStep(s.pos, s.nranks, k);
  const uint64_t block = static_cast<uint64_t>(rankAtPosition(ringTable, rs.chunk)) * s.blockElems + e;
  // Only the first step copies (CopySend, of this rank's own block): in
  // place means the input already is that block of the output.
  const bool inPlace = (s.flags & kSegInPlace) != 0;
  if (gather) return ringActionDesc(rs.action, s.conn[0], s.conn[1], StepInput::Src, e, block, cnt, inPlace);
  return ringActionDesc(rs.action, s.conn[0], s.conn[1], StepInput::Src, block, e, cnt, false);
}

CHORUS_SCHED_FN StepDesc directPairDesc(const Segment& s, uint64_t round, int k) {
  const uint64_t off = round * s.roundElems;
  const uint64_t n = s.count - off < s.roundElems ? s.count - off : s.roundElems;
  const bool fromDst = (s.flags & kSegPairFromDst) != 0;
  StepDesc d;
  d.count = n;
  d.input = fromDst ? StepInput::Dst : StepInput::Src;
  d.srcOff = s.begin + off;
  d.preSrc = fromDst ? 0 : 1;
  if (k == 0) {
    d.send[d.nSend++] = s.conn[1];  // our chunk first, so in place never overwrites unsent input
  } else {
    d.recv[d.nRecv++] = s.conn[0];
    d.dstOff = s.begin + off;
    d.post = (s.flags & kSegPairNotLast) != 0 ? 0 : 1;
  }
  return d;
}

// Hier, step k of a round: G local reduce-scatter steps, 2H-1 inter-host
// all-reduce steps of this rank's chunk, G local all-gather steps (phases
// with one participant are skipped).
CHORUS_SCHED_FN StepDesc hierDesc(const Segment& s, uint64_t round, uint64_t k) {
  const int G = s.nranks, H = s.nranks2;
  const uint64_t off = round * s.roundElems;
  const uint64_t cnt = s.count - off < s.roundElems ? s.count - off : s.roundElems;
  const uint64_t b = s.begin + off;
  if (G > 1 && k < static_cast<uint64_t>(G)) {
    const RingStep rs = ringReduceScatterStep(s.pos, G, static_cast<int>(k));
    const Range chunk = splitEven(cnt, G, rs.chunk);
    StepDesc d = ringActionDesc(rs.action, s.conn[kHierScatterRecv], s.conn[kHierScatterSend], StepInput::Src,
                                b + chunk.begin, b + chunk.begin, chunk.count, false);
    if (rs.action == RingAction::RecvReduceCopy) d.post = H == 1 ? 1 : 0;
    return d;
  }
  if (G > 1) k -= static_cast<uint64_t>(G);
  if (H > 1 && k < static_cast<uint64_t>(2 * H - 1)) {
    const Range mine = splitEven(cnt, G, s.pos);
    const RingStep rs = ringAllReduceStep(s.pos2, H, static_cast<int>(k));
    const Range chunk = splitEven(mine.count, H, rs.chunk);
    const uint64_t e = b + mine.begin + chunk.begin;
    const bool inputIsLocal = G == 1;
    StepDesc d = ringActionDesc(rs.action, s.conn[kHierInterRecv], s.conn[kHierInterSend],
                                inputIsLocal ? StepInput::Src : StepInput::Dst, e, e, chunk.count,
                                (s.flags & kSegInPlace) != 0 || !inputIsLocal);
    d.preSrc = d.preSrc && inputIsLocal ? 1 : 0;
    return d;
  }
  if (H > 1) k -= static_cast<uint64_t>(2 * H - 1);
  const RingStep rs = ringAllGatherStep(s.pos, G, static_cast<int>(k));
  const Range chunk = splitEven(cnt, G, rs.chunk);
  return ringActionDesc(rs.action, s.conn[kHierGatherRecv], s.conn[kHierGatherSend], StepInput::Dst, b + chunk.begin,
                        b + chunk.begin, chunk.count, true);
}

// Wire kinds, piece `round` of the segment's shard. Only the connectors the
// diagnostics name are listed (a WireOwner step waits on all of its table's).
CHORUS_SCHED_FN StepDesc wireDesc(const Segment& s, uint64_t round) {
  const uint64_t off = round * s.roundElems;
  StepDesc d;
  d.count = s.count - off < s.roundElems ? s.count - off : s.roundElems;
  if (wireReadsInput(s.kind)) {
    d.input = StepInput::Src;
    d.srcOff = s.begin + off;
  }
  if (s.kind == SegmentKind::WireGather || s.kind == SegmentKind::WireRelay) d.dstOff = s.begin + off;
  if (s.kind == SegmentKind::WireOwner) d.dstOff = s.blockElems + off;
  const bool sendsOnly = s.kind == SegmentKind::WireSend || s.kind == SegmentKind::WirePartial;
  if (!sendsOnly && s.conn[0] != kNoConn) d.recv[d.nRecv++] = s.conn[0];
  if (s.kind != SegmentKind::WireGather && s.conn[1] != kNoConn) d.send[d.nSend++] = s.conn[1];
  return d;
}

// Step i (0 <= i < segmentSteps(s)). `ringTable` is the plan's rank table at
// s.ringTable (null when the segment has none).
CHORUS_SCHED_FN StepDesc segmentStep(const Segment& s, const int32_t* ringTable, uint64_t i) {
  if (s.kind == SegmentKind::Single) return singleStep(s);
  const uint64_t per = stepsPerRound(s);
  const uint64_t round = i / per, k = i % per;
  switch (s.kind) {
    case SegmentKind::RingAllReduce:
      return ringAllReduceDesc(s, round, static_cast<int>(k));
    case SegmentKind::RingGather:
    case SegmentKind::RingScatter:
      return ringBlockDesc(s, ringTable, round, static_cast<int>(k));
    case SegmentKind::DirectPair:
      return directPairDesc(s, round, static_cast<int>(k));
    case SegmentKind::WireSend:
    case SegmentKind::WireOwner:
    case SegmentKind::WireGather:
    case SegmentKind::WirePartial:
    case SegmentKind::WireHostSum:
    case SegmentKind::WireRelay:
    case SegmentKind::WireChain:
      return wireDesc(s, round);
    default:
      return hierDesc(s, round, k);
  }
}

}  // namespace chorus::sched
