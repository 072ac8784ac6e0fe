// How a lane of the lane kernel stops and tells others why: the failure
// record the host reads after the kernel (LaneLaunch::status, turned into
// the error by describeLaneFailure, src/plan/lane_failure.h), and operation
// fingerprints on the device (docs/reliability.md, "Operation
// fingerprints"): a sender stamps each slot with its call's fingerprint, a
// receiver checks it with step::printMatches before it reads the payload,
// and a mismatch is left as a verdict on every FIFO of the launch (the
// FifoPrints of src/core/op_fingerprint.h, the words the host executor's
// fifoSetMismatch writes), where the peers' waiting lanes find it. Only the
// compare is on the fast path; verdicts are read in the Waiter's slow path.
#pragma once

#include <cuda/atomic>

#include <cstdint>
#include <cstring>

#include "kernels/common/fifo_counters.h"
#include "kernels/lane_plan.h"

namespace chorus::dev {

// Records the first failure of a launch (a record made by the shared
// constructors of kernels/common/step_rules.h); later ones are dropped.
__device__ inline void recordFailure(LaneStatusRecord* rec, const step::LaneFailure& f) {
  if (rec == nullptr) return;
  if (atomicCAS(&rec->claim, 0, 1) == 0) {
    rec->lane = f.lane;
    rec->peer = f.peer;
    rec->detail = f.detail;
    rec->received = f.received;
    rec->expected = f.expected;
    if (f.status == static_cast<int32_t>(LaneStatus::OpMismatch)) rec->mismatch = f.mismatch;
    __threadfence_system();
    *reinterpret_cast<volatile int32_t*>(&rec->status) = f.status;
    __threadfence_system();
  }
}

// A record as 64-bit words through volatile accesses (the other end may be
// another GPU or the CPU). The record's bytes go through a word array with
// memcpy: reading or writing an OpPrint through a uint64_t pointer breaks
// the aliasing rules, and a compiler may then keep the fields it already
// knows (the CPU build of this code, tests/kernel_sim/, returned a record
// whose fields past the first word were their defaults).
template <typename T, int kWords = sizeof(T) / 8>
__device__ __forceinline__ void storeWords(T* to, const T& from) {
  static_assert(sizeof(T) % 8 == 0 && alignof(T) >= 8, "copied as 64-bit words");
  uint64_t words[kWords];
  memcpy(words, &from, sizeof(T));
  volatile uint64_t* d = reinterpret_cast<volatile uint64_t*>(to);
#pragma unroll
  for (int i = 0; i < kWords; ++i) d[i] = words[i];
}
template <typename T, int kWords = sizeof(T) / 8>
__device__ __forceinline__ T loadWords(const T* from) {
  static_assert(sizeof(T) % 8 == 0 && alignof(T) >= 8, "copied as 64-bit words");
  const volatile uint64_t* s = reinterpret_cast<const volatile uint64_t*>(from);
  uint64_t words[kWords];
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = s[i];
  T out;
  memcpy(&out, words, sizeof(T));
  return out;
}

// The fingerprint of the launch's task `task` (none in a launch without them).
__device__ __forceinline__ OpPrint taskPrint(const LaneParams& P, uint16_t task) {
  return task < P.L.nTasks ? P.prints[task] : OpPrint{};
}

// Sender (one thread): the slot's fingerprint, written before the slot is
// published (the publication's fence orders it).
__device__ __forceinline__ void stampSlot(const DevFifo& f, uint64_t pos, const OpPrint& p) {
  if (f.prints != nullptr) storeWords(&f.prints->slot[fifo::slotIndex(pos, f.nslots)], p);
}

// Leaves `r` on the FIFO unless a verdict is there already. Plain stores,
// not a compare-and-swap: atomics need not work across PCIe; two ends
// racing to write describe the same mismatch, and step::canonicalMismatch
// makes them write the same bytes.
__device__ inline void setVerdict(const DevFifo& f, const OpMismatchRecord& r) {
  if (f.prints == nullptr) return;
  volatile uint32_t* v = &f.prints->verdict;
  if (*v != kVerdictNone) return;
  *v = kVerdictWriting;
  storeWords(&f.prints->mismatch, step::canonicalMismatch(r));
  __threadfence_system();
  *v = kVerdictValid;
}

// The verdict on the FIFO, if any.
__device__ inline bool readVerdict(const DevFifo& f, OpMismatchRecord* r) {
  if (f.prints == nullptr) return false;
  if (*reinterpret_cast<const volatile uint32_t*>(&f.prints->verdict) != kVerdictValid) return false;
  cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
  *r = loadWords(&f.prints->mismatch);
  return true;
}

// A mismatch this lane found or learned: the failure record, and the
// verdict on every FIFO of the launch, so every neighbour stops too.
__device__ inline void stopOnMismatch(const LaneParams& P, int peer, const OpMismatchRecord& r) {
  step::LaneFailure f = step::waitFailure(LaneStatus::OpMismatch, blockIdx.x, peer);
  f.mismatch = r;
  recordFailure(P.L.status, f);
  for (int i = 0; i < P.L.nFifos; ++i) setVerdict(P.fifos[i], r);
}

// Receiver (one thread, once the slot at `pos` is published and ordered
// before this read): whether it belongs to this rank's call `mine`
// (step::printMatches, the host executor's rule). On a mismatch the lane stops.
__device__ inline bool acceptPrint(const LaneParams& P, const DevFifo& f, uint64_t pos, const OpPrint& mine) {
  if (f.prints == nullptr || mine.valid == 0) return true;
  const OpPrint got = loadWords(&f.prints->slot[fifo::slotIndex(pos, f.nslots)]);
  if (step::printMatches(got, step::expectedFromPeer(mine))) return true;
  stopOnMismatch(P, f.peer, step::opMismatch(blockIdx.x, P.L.rank, f.peer, mine, got).mismatch);
  return false;
}

}  // namespace chorus::dev
