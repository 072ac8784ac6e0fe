// The rules of a step, written once for both executors: progressLane() of
// the host executor (src/host/step_exec.cc) and the lane kernel
// (kernels/colls/lane_kernel.cuh) call these functions and nothing else to
// decide
//   * how many elements the next piece of a step moves,
//   * which combination a step computes (five cases below) and as which
//     stages: operands, scalar and division, and where the result goes,
//   * what a received slot holds: the expected piece, a zero-copy
//     descriptor, or a mismatch between the ranks' calls,
//   * whether the slot belongs to the operation this rank is running (its
//     fingerprint, src/core/op_fingerprint.h),
//   * whether a send goes zero-copy, how a zero-copy receive is checked and
//     chunked (kernels/common/direct_slot.h),
//   * and how a failure becomes a status record.
// What stays executor-specific is only how bytes move: a CPU loop with SIMD
// functors, or a thread block with vectorized loads, the LL protocol's flag
// lines and memory fences. So every decision the kernel takes is exercised
// by the host-mode tests.
#pragma once

#include <cstdint>

#include "core/op_fingerprint.h"
#include "kernels/common/compiler.h"
#include "kernels/common/direct_slot.h"
#include "sched/segment.h"

namespace chorus::step {

using sched::StepDesc;
using sched::StepInput;

CHORUS_HD CHORUS_INLINE bool hasOutput(const StepDesc& s) { return s.dstOff != sched::kNoBuffer; }
CHORUS_HD CHORUS_INLINE bool hasInput(const StepDesc& s) { return s.input != StepInput::None; }
CHORUS_HD CHORUS_INLINE bool movesData(const StepDesc& s) { return s.nRecv + s.nSend > 0; }

// The buffer a step reads its input from: the segment's src or dst (an
// in-place step reads what an earlier step left in the output), or none.
// Each executor adds the step's srcOff in its own units.
CHORUS_HD CHORUS_INLINE const void* inputBuffer(const StepDesc& s, const void* segSrc, const void* segDst) {
  return s.input == StepInput::Src ? segSrc : s.input == StepInput::Dst ? segDst : nullptr;
}

// --- piece sizing -------------------------------------------------------------

// Elements per piece of a step: one connector slot's payload when the step
// moves data (at least one element), the whole step when it is local.
CHORUS_HD CHORUS_INLINE uint64_t pieceElems(const StepDesc& s, uint32_t pieceBytes, uint32_t elemBytes) {
  if (!movesData(s)) return s.count;
  const uint64_t per = pieceBytes / elemBytes;
  return per > 0 ? per : 1;
}

// Elements of the piece that starts `done` elements into the step.
CHORUS_HD CHORUS_INLINE uint64_t nextPiece(const StepDesc& s, uint32_t pieceBytes, uint32_t elemBytes, uint64_t done) {
  const uint64_t per = pieceElems(s, pieceBytes, elemBytes), left = s.count - done;
  return per < left ? per : left;
}

// --- the combination ----------------------------------------------------------

// What a step computes into its target, with r0, r1 the received pieces and
// `in` the local input (PreMulSum's scalar applied when preSrc) and `post`
// the average's division applied once to the final value:
enum class Combine : uint8_t {
  Transform,    // in               -> target
  Forward,      // r0               -> target
  ReduceInput,  // r0 (+) in        -> target
  ReduceTwo,    // r0 (+) r1        -> target
  ReduceThree,  // (r0 (+) r1) (+) in, in two stages (combinePlan). The GPU keeps the partial
                // r0 (+) r1 in r0's storage, the host in target: both are right because
                // ReduceThree comes only from a tree node with two children reducing
                // upwards, whose target is a send slot, never `in`
};

CHORUS_HD CHORUS_INLINE Combine combineCase(const StepDesc& s) {
  if (s.nRecv == 0) return Combine::Transform;
  if (s.nRecv == 1) return hasInput(s) ? Combine::ReduceInput : Combine::Forward;
  return hasInput(s) ? Combine::ReduceThree : Combine::ReduceTwo;
}

// The combination as the stages an executor runs: which operands each stage
// reads, where PreMulSum's scalar and the average's division apply, and
// where the result goes. Both executors run exactly these stages; what they
// choose is only where a ReduceThree's partial value (r0 (+) r1) is kept.
enum class Operand : uint8_t {
  None,     // no second operand: the stage transforms `a` alone
  Input,    // the local input piece
  Recv0,    // the first received piece
  Recv1,    // the second received piece
  Partial,  // the previous stage's result
};

struct CombineStage {
  Operand a = Operand::None;  // never Input when b is set: a received piece or the partial comes first
  Operand b = Operand::None;
  bool preA = false, preB = false;  // PreMulSum's scalar applied to that operand
  bool post = false;                // SumPostDiv's division applied to the result
  bool intoPartial = false;         // the result is the partial value, not the step's target
};

struct CombinePlan {
  int stages = 0;
  CombineStage stage[2];
};

CHORUS_HD CHORUS_INLINE CombinePlan combinePlan(const StepDesc& s) {
  const bool pre = s.preSrc != 0, post = s.post != 0;
  CombinePlan p;
  p.stages = 1;
  CombineStage& first = p.stage[0];
  first.post = post;
  switch (combineCase(s)) {
    case Combine::Transform:
      first.a = Operand::Input;
      first.preA = pre;
      break;
    case Combine::Forward:
      first.a = Operand::Recv0;
      break;
    case Combine::ReduceInput:
      first.a = Operand::Recv0;
      first.b = Operand::Input;
      first.preB = pre;
      break;
    case Combine::ReduceTwo:
      first.a = Operand::Recv0;
      first.b = Operand::Recv1;
      break;
    case Combine::ReduceThree:
      first.a = Operand::Recv0;
      first.b = Operand::Recv1;
      first.post = false;
      first.intoPartial = true;
      p.stages = 2;
      p.stage[1].a = Operand::Partial;
      p.stage[1].b = Operand::Input;
      p.stage[1].preB = pre;
      p.stage[1].post = post;
      break;
  }
  return p;
}

// A receive straight into the output with nothing else to do: the only step
// that may take a zero-copy descriptor.
CHORUS_HD CHORUS_INLINE bool plainReceive(const StepDesc& s) {
  return s.nRecv == 1 && s.nSend == 0 && !hasInput(s) && hasOutput(s) && s.post == 0;
}

// --- what a received slot holds ----------------------------------------------

enum class SlotHolds : uint8_t { Piece, Descriptor, Mismatch };

// `published`: the size the sender published with the slot; `expected`: the
// piece this rank's step wants. A descriptor is recognised only at the start
// of a single receive; a plain-receive check follows (checkDescriptor).
CHORUS_HD CHORUS_INLINE SlotHolds classifySlot(const StepDesc& s, uint32_t published, uint32_t expected) {
  if (published == kDirectSlotMarker && s.nRecv == 1) return SlotHolds::Descriptor;
  return published == expected ? SlotHolds::Piece : SlotHolds::Mismatch;
}

// --- operation fingerprints --------------------------------------------------

// What a receiver of `mine` (this rank's call) expects the sender's slots to
// carry: the same fingerprint for a collective; for a Recv, the matching Send.
CHORUS_HD CHORUS_INLINE OpPrint expectedFromPeer(const OpPrint& mine) {
  OpPrint p = mine;
  if (mine.coll == static_cast<uint8_t>(CollType::Recv)) p.coll = static_cast<uint8_t>(CollType::Send);
  return p;
}

// Whether a slot the peer stamped with `got` belongs to the operation whose
// incoming slots should carry `want` (expectedFromPeer of this rank's call).
// A slot without a fingerprint (valid == 0) is not judged.
CHORUS_HD CHORUS_INLINE bool printMatches(const OpPrint& got, const OpPrint& want) {
  if (got.valid == 0 || want.valid == 0) return true;
  return got.seq == want.seq && got.count == want.count && got.coll == want.coll && got.dtype == want.dtype &&
         got.op == want.op && got.root == want.root && got.wire == want.wire && got.deterministic == want.deterministic;
}

// --- zero-copy ------------------------------------------------------------------

// A plain send of a registered buffer goes zero-copy when the receiver can
// read the sender's memory by address (FifoEnd::peerReadsOurBuffers).
CHORUS_HD CHORUS_INLINE bool sendsZeroCopy(const StepDesc& s, bool peerReadsOurBuffers) {
  return s.direct != 0 && s.nSend == 1 && s.nRecv == 0 && hasInput(s) && peerReadsOurBuffers;
}

enum class DescriptorCheck : uint8_t { Ok = 0, MidReceive = 1, NotPlainReceive = 2, WrongSize = 3 };

// Whether this rank's step can take a descriptor of `sentBytes`: only a
// plain receive at its start, of exactly the step's remaining bytes.
CHORUS_HD CHORUS_INLINE DescriptorCheck checkDescriptor(const StepDesc& s, uint64_t done, uint64_t sentBytes,
                                                        uint32_t elemBytes) {
  if (done != 0) return DescriptorCheck::MidReceive;
  if (!plainReceive(s)) return DescriptorCheck::NotPlainReceive;
  if (sentBytes != s.count * elemBytes) return DescriptorCheck::WrongSize;
  return DescriptorCheck::Ok;
}

// The receiver copies a descriptor's bytes in chunks and publishes its
// progress after each; this is the chunk starting at `off`.
CHORUS_HD CHORUS_INLINE uint64_t directChunk(uint64_t off, uint64_t total) {
  return total - off < kDirectChunkBytes ? total - off : kDirectChunkBytes;
}

// --- failures -------------------------------------------------------------------

// Why a lane stopped. Written once per communicator (first failure wins).
enum class LaneStatus : int32_t {
  Ok = 0,
  Aborted = 1,
  TimedOut = 2,
  SizeMismatch = 3,
  DescriptorMismatch = 4,
  OpMismatch = 5,  // the ranks' calls differ: `mismatch` names both
};

// The failure record. On the GPU it lives in mapped host memory: the first
// failing thread claims it, fills the fields, fences, and publishes `status`
// last, so a host that sees a nonzero status also sees the fields. The host
// executor fills one on its stack. Either way one function
// (describeLaneFailure, src/plan/lane_failure.h) turns it into the error.
struct LaneFailure {
  int32_t status = 0;  // a LaneStatus
  int32_t lane = -1;
  int32_t peer = -1;      // the rank at the other end of the connector
  uint32_t detail = 0;    // SizeMismatch: bytes received; DescriptorMismatch: a DescriptorCheck
  uint64_t received = 0;  // DescriptorMismatch: bytes the descriptor announced
  uint64_t expected = 0;  // bytes this rank's step expected
  int32_t claim = 0;      // GPU: nonzero once a thread owns the record
  int32_t pad = 0;
  OpMismatchRecord mismatch;  // OpMismatch
};
// The GPU record crosses to the host field by field (recordFailure in
// kernels/primitives/lane_failure.cuh writes it, commPollError in
// src/gpu/cuda/comm_state.cc reads it): a field added here must be added to
// both, or one side drops it. This fails until the sizes are updated too.
static_assert(sizeof(LaneFailure) == 40 + sizeof(OpMismatchRecord),
              "LaneFailure changed: update recordFailure and commPollError, then this size");

// `rank`'s call `mine` received a slot of `theirs` from `peer`. `mine` is
// this rank's own fingerprint (not the expected incoming one), so the
// message names the Recv a receiver called.
CHORUS_HD CHORUS_INLINE LaneFailure opMismatch(int lane, int rank, int peer, const OpPrint& mine,
                                               const OpPrint& theirs) {
  LaneFailure f;
  f.status = static_cast<int32_t>(LaneStatus::OpMismatch);
  f.lane = lane;
  f.peer = peer;
  f.mismatch.mine = mine;
  f.mismatch.theirs = theirs;
  f.mismatch.rank = rank;
  f.mismatch.peer = peer;
  return f;
}

// A mismatch as the lower-numbered rank of the pair describes it. The two
// GPU ends of a FIFO can find the same mismatch at once and leave it on the
// FIFO with plain stores (atomics need not work across PCIe); written in
// one orientation, both writes hold the same bytes, so they cannot tear
// into a record that mixes the two. Records with a fingerprint missing or
// a wait-cycle mark keep their orientation (their text depends on it).
CHORUS_HD CHORUS_INLINE OpMismatchRecord canonicalMismatch(const OpMismatchRecord& r) {
  if (r.rank <= r.peer || r.mine.valid == 0 || r.theirs.valid == 0 || r.mine.pad != 0) return r;
  return OpMismatchRecord{r.theirs, r.mine, r.peer, r.rank};
}

CHORUS_HD CHORUS_INLINE LaneFailure sizeMismatch(int lane, int peer, uint32_t got, uint32_t expected) {
  LaneFailure f;
  f.status = static_cast<int32_t>(LaneStatus::SizeMismatch);
  f.lane = lane;
  f.peer = peer;
  f.detail = got;
  f.expected = expected;
  return f;
}

CHORUS_HD CHORUS_INLINE LaneFailure descriptorMismatch(int lane, int peer, DescriptorCheck why, uint64_t sentBytes,
                                                       uint64_t expectedBytes) {
  LaneFailure f;
  f.status = static_cast<int32_t>(LaneStatus::DescriptorMismatch);
  f.lane = lane;
  f.peer = peer;
  f.detail = static_cast<uint32_t>(why);
  f.received = sentBytes;
  f.expected = expectedBytes;
  return f;
}

CHORUS_HD CHORUS_INLINE LaneFailure waitFailure(LaneStatus why, int lane, int peer) {
  LaneFailure f;
  f.status = static_cast<int32_t>(why);
  f.lane = lane;
  f.peer = peer;
  return f;
}

// The peer a step waits on first: the first receive's, else the first send's.
struct PeerOf {
  int connector;
  bool receiving;
};
CHORUS_HD CHORUS_INLINE PeerOf waitedConnector(const StepDesc& s) {
  if (s.nRecv > 0) return {s.recv[0], true};
  return {s.nSend > 0 ? s.send[0] : sched::kNoConn, false};
}

}  // namespace chorus::step
