// Operation fingerprints: what a rank believes the operation it is running
// is (sequence number, collective, count, datatype, reduction, root). Every
// slot a rank posts carries the fingerprint of the operation it belongs to
// (FifoControl::prints, src/transport/fifo.h); the receiver checks it against
// the fingerprint it expects (step::printMatches, kernels/common/step_rules.h)
// before it touches the payload, so ranks that made different calls fail
// with a message naming both calls instead of hanging or returning different
// results. See docs/reliability.md, "Operation fingerprints".
//
// Sequence numbers: collectives are counted per communicator (every rank
// calls them in the same order); sends and receives per peer and direction
// (send #3 from rank 0 to rank 1 is rank 1's receive #3 from rank 0). Both
// start at 1. A grouped call is one operation per call.
//
// Plain data only (no CUDA decorations needed): the lane kernel reads the
// same structs in mapped memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/coll_types.h"

namespace chorus {

inline constexpr uint8_t kNoRedOp = 0xff;  // OpPrint::op of an operation that does not reduce
inline constexpr int32_t kNoRoot = -1;     // OpPrint::root of an operation without a root

// 24 bytes, compared as three 64-bit words. valid == 0: no fingerprint (a
// slot posted by a mover that does not carry them); it matches anything.
struct OpPrint {
  uint64_t count = 0;  // per-rank count as in the API
  uint32_t seq = 0;    // 1, 2, ... (see above)
  int32_t root = kNoRoot;
  uint8_t coll = 0;       // a CollType
  uint8_t dtype = 0;      // an ncclDataType_t
  uint8_t op = kNoRedOp;  // a ReduceKind, or kNoRedOp
  uint8_t valid = 0;
  uint8_t wire = 0;           // a chorusWire_t (0: the datatype itself)
  uint8_t deterministic = 0;  // 1: the rank-order sum of docs/wire.md
  uint16_t pad = 0;
};
static_assert(sizeof(OpPrint) == 24, "OpPrint is three 64-bit words (slot header and GPU records)");

inline constexpr uint32_t kMaxFifoSlots = 64;  // slots of one FIFO at most (src/transport/fifo.h)

// Two calls that did not match, as the rank that found out saw them:
// `mine` is what rank `rank` called, `theirs` what its peer rank `peer`
// sent. Travels unchanged to every other rank that learns of the mismatch,
// so all of them print the same text.
struct OpMismatchRecord {
  OpPrint mine;
  OpPrint theirs;
  int32_t rank = -1;
  int32_t peer = -1;
};
// In OpMismatchRecord::mine.pad: the two calls are point-to-point calls of
// a cycle of waits (plan/setup_notes.cc, wait chains), each print's `root`
// holding its peer; describeOpMismatch then says so.
inline constexpr uint16_t kWaitCycleMark = 1;

// The fingerprint part of a FIFO's control block (FifoControl::prints):
// the print of every slot, and the verdict an end leaves when it found (or
// learned) that the two ends' calls do not match. Plain words, so the host
// (std::atomic_ref, src/transport/fifo.h) and the lane kernel
// (cuda::atomic_ref, kernels/primitives/op_verdict.cuh) share the layout.
// `verdict`: one of the three states below; first one wins.
inline constexpr uint32_t kVerdictNone = 0;     // no verdict
inline constexpr uint32_t kVerdictWriting = 1;  // `mismatch` being written
inline constexpr uint32_t kVerdictValid = 2;    // `mismatch` valid
struct FifoPrints {
  OpPrint slot[kMaxFifoSlots];
  alignas(64) uint32_t verdict = kVerdictNone;
  uint32_t pad = 0;
  OpMismatchRecord mismatch;
};

// The fingerprint of one call. `seq` comes from OpCounters::next. What a
// receiver expects its peer's slots to carry is step::expectedFromPeer
// (kernels/common/step_rules.h, shared with the lane kernel).
// `wire` and `deterministic`: how the reduction travels (WireSpec); ranks
// that disagree on it would combine different encodings, so it is judged too.
OpPrint makeOpPrint(CollType coll, size_t count, ncclDataType_t dtype, ReduceKind kind, int root, uint32_t seq,
                    uint8_t wire = 0, bool deterministic = false);

// "AllReduce(1000 x float, sum)", "Broadcast(8 x int32, root 1)",
// "Send(1000 x float)". Returns the characters written (as snprintf).
int describeOpPrint(const OpPrint& p, char* out, size_t n);

// "op #17: rank 1 called AllReduce(2000 x float, sum), rank 0 called
// AllReduce(1000 x float, sum)"; for point-to-point "send #3 from rank 0 to
// rank 1: rank 0 called Send(1000 x float), rank 1 called Recv(2000 x float)".
int describeOpMismatch(const OpMismatchRecord& r, char* out, size_t n);

// Name of a datatype as the messages print it ("float", "int32", ...); "?"
// for a value that is none (fingerprints come from other processes, so the
// byte is checked before it becomes an ncclDataType_t).
const char* dtypeName(int t);
// Name of a reduction ("sum", "max", "avg", ...).
const char* reduceKindName(ReduceKind k);

// The sequence counters of one communicator (guarded by its opMutex).
class OpCounters {
 public:
  // The sequence number of the next call of `coll` (with peer `peer` for Send/Recv).
  uint32_t next(CollType coll, int peer) { return isSendOrRecv(coll) && peer >= 0 ? nextWith(coll, peer) : ++coll_; }
  // Collectives numbered so far; receives from and sends to `peer` numbered so far.
  uint32_t collectives() const { return coll_; }
  uint32_t received(int peer) const { return peer >= 0 && static_cast<size_t>(peer) < recv_.size() ? recv_[peer] : 0; }
  uint32_t sent(int peer) const { return peer >= 0 && static_cast<size_t>(peer) < send_.size() ? send_[peer] : 0; }

 private:
  uint32_t nextWith(CollType coll, int peer);  // Send/Recv
  uint32_t coll_ = 0;
  std::vector<uint32_t> send_, recv_;
};

}  // namespace chorus
