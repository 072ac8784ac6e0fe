// The lane kernel: runs a lane plan (kernels/lane_plan.h) with one thread
// block per lane. It generates each lane's steps from its segments with
// src/sched/segment.h and decides everything about a step with
// kernels/common/step_rules.h, the same code progressLane() of the host
// executor (src/host/step_exec.cc) runs: the same pieces, the same operands
// combined in the same order (combinePlan), so a schedule gives
// bit-identical results on both executors. What is device-only here is
// thread-level: the block-wide vectorized copy/reduce, the LL protocol's
// flag lines, shared-memory staging, barriers and fences
// (docs/architecture.md lists it).
//
// Per piece, thread 0 waits for the connectors (bounded by Waiter) and checks
// the received slots' fingerprints (kernels/primitives/lane_failure.cuh), the
// block synchronizes, every thread combines its share of the piece, the block
// synchronizes again, and thread 0 publishes (with this rank's fingerprint)
// and frees slots. A zero-copy
// send step posts a descriptor instead and waits for it to be freed; a plain
// receive that finds one copies the whole step from the sender's buffer
// (kernels/common/direct_slot.h). With the LL protocol the receive side is
// polled by all threads on their own lines and the piece is staged in shared
// memory, which is what makes it cheap for the small messages it is used for.
//
// All blocks of a launch must be co-resident (a lane may wait for another
// lane of the same launch); the executor sizes launches accordingly.
#pragma once

#include "kernels/lane_plan.h"
#include "kernels/primitives/elementwise.cuh"
#include "kernels/primitives/fifo_device.cuh"
#include "kernels/primitives/functor_of.cuh"

namespace chorus::dev {

inline constexpr int kLaneMaxThreads = 512;

// The combination a step asks for, with the run-time flags turned into
// template arguments. Only PreMulSum has pre flags and only SumPostDiv a post
// flag; for the other kinds they are identities and are not instantiated.
template <typename T, ReduceKind K, bool CgA, bool CgB, bool Two, typename Fn>
__device__ __forceinline__ void reduceAs(const Fn& fn, T* dst, const T* a, bool preA, const T* b, bool preB, size_t n,
                                         bool post) {
  const size_t first = threadIdx.x, stride = blockDim.x;
  if constexpr (K == ReduceKind::PreMulSum) {
    if (preA && preB)
      combineRange<true, true, false, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
    else if (preA)
      combineRange<true, false, false, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
    else if (preB)
      combineRange<false, true, false, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
    else
      combineRange<false, false, false, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
  } else if constexpr (K == ReduceKind::SumPostDiv) {
    if (post)
      combineRange<false, false, true, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
    else
      combineRange<false, false, false, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
  } else {
    combineRange<false, false, false, CgA, CgB, Two>(fn, dst, a, b, n, first, stride);
  }
}

// One stage of step_rules.h's combinePlan into `into`. A received operand
// (Cg: in connector slots) takes L1-bypassing loads; the plan puts a received
// piece or the partial first whenever there are two operands, so the
// instantiations are those of the four one-stage cases.
template <typename T, ReduceKind K, bool Cg, typename Fn>
__device__ __forceinline__ void combineStage(const Fn& fn, const step::CombineStage& st, T* into, const T* a,
                                             const T* b, size_t n) {
  if (st.b == step::Operand::None) {
    if (st.a == step::Operand::Input)
      reduceAs<T, K, false, false, false>(fn, into, a, st.preA, static_cast<const T*>(nullptr), false, n, st.post);
    else
      reduceAs<T, K, Cg, false, false>(fn, into, a, st.preA, static_cast<const T*>(nullptr), false, n, st.post);
  } else if (st.b == step::Operand::Input) {
    reduceAs<T, K, Cg, false, true>(fn, into, a, st.preA, b, st.preB, n, st.post);
  } else {
    reduceAs<T, K, Cg, Cg, true>(fn, into, a, st.preA, b, st.preB, n, st.post);
  }
}

// The piece's value into `target`, from received pieces r0/r1 and the local
// input src, by step_rules.h's combinePlan. A two-stage plan keeps its
// partial value in r0's storage (local memory; `target` may be a slot in a
// peer's memory, slow to read back).
template <typename T, ReduceKind K, bool Cg, typename Fn>
__device__ void combinePiece(const Fn& fn, const DevStep& s, T* target, T* r0, const T* r1, const T* src, size_t n) {
  const step::CombinePlan plan = step::combinePlan(s.desc);
#pragma unroll
  for (int i = 0; i < 2; ++i) {  // unrolled, so the plan stays in registers
    if (i >= plan.stages) break;
    const step::CombineStage& st = plan.stage[i];
    const auto at = [&](step::Operand o) -> const T* {
      return o == step::Operand::Input ? src : o == step::Operand::Recv1 ? r1 : o == step::Operand::None ? nullptr : r0;
    };
    if (i > 0) __syncthreads();  // the previous stage's partial is complete
    combineStage<T, K, Cg>(fn, st, st.intoPartial ? r0 : target, at(st.a), at(st.b), n);
  }
}

// Cg: src may be written by another agent during the launch (L1-bypassing loads).
template <typename T, bool Cg = false>
__device__ __forceinline__ void copyPiece(T* dst, const T* src, size_t n) {
  FuncSum<T> identity;
  combineRange<false, false, false, Cg, false, false>(identity, dst, src, static_cast<const T*>(nullptr), n,
                                                      threadIdx.x, blockDim.x);
}

struct LaneShared {
  int failed;
  const void* directFrom;                               // a zero-copy piece: the sender's buffer (set by thread 0)
  alignas(16) uint32_t stage[3][kLLMaxPieceBytes / 4];  // LL: two received pieces and the result
};

// The slot at a connector end's current position.
template <typename T>
__device__ __forceinline__ T* currentSlot(const LaneParams& P, int fifo) {
  const DevFifo& f = P.fifos[fifo];
  return reinterpret_cast<T*>(slotAt(f, *f.position));
}

// Thread 0: waits for the step's send slots to be free and, with Simple
// (waitRecvs), for its receive slots to be filled. False on failure.
__device__ inline bool waitConnectors(const LaneParams& P, const DevStep& s, uint32_t bytes, bool waitRecvs,
                                      Waiter& w) {
  const OpPrint mine = taskPrint(P, s.task);
  for (int i = 0; waitRecvs && i < s.desc.nRecv; ++i)
    if (!waitFilled(P, P.fifos[s.desc.recv[i]], s.desc, bytes, mine, w)) return false;
  for (int i = 0; i < s.desc.nSend; ++i)
    if (!waitEmpty(P.fifos[s.desc.send[i]], w)) return false;
  return true;
}

// Thread 0, for a step with one receive: waits for its slot, checks that it
// belongs to this rank's call (its fingerprint), and whether it holds the
// next piece (`bytes`) or a zero-copy descriptor of the whole step (noted in
// sh), or is a mismatch: step_rules.h decides which.
__device__ inline bool waitSingleReceive(const LaneParams& P, const DevStep& s, uint64_t done, uint32_t bytes,
                                         uint32_t elemBytes, LaneShared& sh, Waiter& w) {
  const DevFifo& f = P.fifos[s.desc.recv[0]];
  uint32_t got = 0;
  if (!waitPublished(f, w, &got)) return false;
  if (!acceptPrint(P, f, *f.position, taskPrint(P, s.task))) return false;
  switch (step::classifySlot(s.desc, got, bytes)) {
    case step::SlotHolds::Piece:
      return true;
    case step::SlotHolds::Mismatch:
      recordFailure(P.L.status, step::sizeMismatch(blockIdx.x, f.peer, got, bytes));
      return false;
    case step::SlotHolds::Descriptor:
      break;
  }
  // Volatile: the slot may hold an earlier descriptor in this SM's L1.
  const volatile DirectDescriptor* d = reinterpret_cast<const volatile DirectDescriptor*>(slotAt(f, *f.position));
  const uint64_t address = d->address, sent = d->bytes;
  const step::DescriptorCheck check = step::checkDescriptor(s.desc, done, sent, elemBytes);
  if (check != step::DescriptorCheck::Ok) {
    recordFailure(P.L.status,
                  step::descriptorMismatch(blockIdx.x, f.peer, check, sent, (s.desc.count - done) * elemBytes));
    return false;
  }
  sh.directFrom =
      reinterpret_cast<const void*>(address);  // NOLINT(performance-no-int-to-ptr): the descriptor carries an address
  return true;
}

// A zero-copy send step (whole block; thread 0 works): posts the descriptor
// and waits until the receiver freed it, so the caller's buffer is no longer
// read once the step ends.
__device__ inline bool directSend(const LaneParams& P, const DevStep& s, size_t elemBytes, LaneShared& sh, Waiter& w) {
  if (threadIdx.x == 0) {
    const DevFifo& f = P.fifos[s.desc.send[0]];
    bool ok = waitEmpty(f, w);
    if (ok) {
      const uint64_t pos = *f.position;
      volatile DirectDescriptor* d = reinterpret_cast<volatile DirectDescriptor*>(slotAt(f, pos));
      d->address = reinterpret_cast<uint64_t>(s.src);
      d->bytes = s.desc.count * elemBytes;
      d->copied = 0;
      publishSimple(f, kDirectSlotMarker, taskPrint(P, s.task));
      ok = waitFreed(f, pos, &d->copied, w);
    }
    if (!ok) sh.failed = 1;
  }
  __syncthreads();
  return sh.failed == 0;
}

// The receiving side of a zero-copy send: the whole step from the sender's
// buffer, in step_rules.h's chunks; after each, thread 0 publishes the
// progress the waiting sender watches.
template <typename T>
__device__ void directReceive(const LaneParams& P, const DevStep& s, const LaneShared& sh) {
  const DevFifo& f = P.fifos[s.desc.recv[0]];
  volatile DirectDescriptor* d = reinterpret_cast<volatile DirectDescriptor*>(slotAt(f, *f.position));
  const uint64_t total = s.desc.count * sizeof(T);
  for (uint64_t off = 0; off < total;) {
    const uint64_t m = step::directChunk(off, total);
    copyPiece<T, true>(static_cast<T*>(s.dst) + off / sizeof(T), static_cast<const T*>(sh.directFrom) + off / sizeof(T),
                       m / sizeof(T));
    off += m;
    __syncthreads();
    if (threadIdx.x == 0) d->copied = off;
  }
  __syncthreads();
  if (threadIdx.x == 0) releaseSlot(f);
}

// One Simple piece, or a whole zero-copy step at the start of a single
// receive. Returns the elements consumed; 0 when the launch must stop.
template <typename T, ReduceKind K, typename Fn>
__device__ size_t simplePiece(const LaneParams& P, const Fn& fn, const DevStep& s, size_t done, size_t n,
                              LaneShared& sh, Waiter& w) {
  const uint32_t bytes = static_cast<uint32_t>(n * sizeof(T));
  if (threadIdx.x == 0) {
    sh.directFrom = nullptr;
    const bool single = s.desc.nRecv == 1;
    const bool ok =
        single ? waitSingleReceive(P, s, done, bytes, sizeof(T), sh, w) : waitConnectors(P, s, bytes, true, w);
    if (ok && single && sh.directFrom == nullptr) {
      // The receive was checked; wait for the send slots too.
      for (int i = 0; i < s.desc.nSend && sh.failed == 0; ++i)
        if (!waitEmpty(P.fifos[s.desc.send[i]], w)) sh.failed = 1;
    }
    if (!ok) sh.failed = 1;
  }
  __syncthreads();
  if (sh.failed) return 0;
  if (sh.directFrom != nullptr) {
    directReceive<T>(P, s, sh);
    return size_t(s.desc.count);
  }
  T* r0 = s.desc.nRecv > 0 ? currentSlot<T>(P, s.desc.recv[0]) : nullptr;
  const T* r1 = s.desc.nRecv > 1 ? currentSlot<T>(P, s.desc.recv[1]) : nullptr;
  const T* src = s.src ? static_cast<const T*>(s.src) + done : nullptr;
  T* dst = s.dst ? static_cast<T*>(s.dst) + done : nullptr;
  // Compute into the local output when there is one (send slots may be in a
  // peer's memory, slow to read back), else into the first send slot.
  T* target = dst ? dst : currentSlot<T>(P, s.desc.send[0]);
  combinePiece<T, K, true>(fn, s, target, r0, r1, src, n);
  __syncthreads();
  for (int i = (dst ? 0 : 1); i < s.desc.nSend; ++i) copyPiece(currentSlot<T>(P, s.desc.send[i]), target, n);
  __syncthreads();
  if (threadIdx.x == 0) {
    const OpPrint mine = taskPrint(P, s.task);
    for (int i = 0; i < s.desc.nSend; ++i) publishSimple(P.fifos[s.desc.send[i]], bytes, mine);
    for (int i = 0; i < s.desc.nRecv; ++i) releaseSlot(P.fifos[s.desc.recv[i]]);
  }
  return n;
}

// One LL piece (bytes <= kLLMaxPieceBytes). False when the launch must stop.
template <typename T, ReduceKind K, typename Fn>
__device__ bool llPiece(const LaneParams& P, const Fn& fn, const DevStep& s, size_t done, size_t n, LaneShared& sh,
                        Waiter& w) {
  const uint32_t bytes = static_cast<uint32_t>(n * sizeof(T));
  const OpPrint mine = taskPrint(P, s.task);
  if (threadIdx.x == 0) {
    if (!waitConnectors(P, s, bytes, false, w))
      sh.failed = 1;
    else
      for (int i = 0; i < s.desc.nSend; ++i) stampLL(P.fifos[s.desc.send[i]], bytes, mine);
  }
  bool ok = true;
  for (int i = 0; i < s.desc.nRecv && ok; ++i) {
    const DevFifo& f = P.fifos[s.desc.recv[i]];
    ok = llRead(P, f, *f.position, sh.stage[i], bytes, mine, w);
  }
  if (!ok) atomicExch(&sh.failed, 1);
  __syncthreads();
  if (sh.failed) return false;
  const T* src = s.src ? static_cast<const T*>(s.src) + done : nullptr;
  T* dst = s.dst ? static_cast<T*>(s.dst) + done : nullptr;
  T* out = reinterpret_cast<T*>(sh.stage[2]);
  if (s.desc.nSend == 0) out = dst;  // nothing to pack: write the output directly
  // Zero the padding of the last 4-byte word so lines carry defined bytes.
  if (s.desc.nSend > 0 && threadIdx.x == 0 && bytes % 4 != 0) sh.stage[2][bytes / 4] = 0;
  __syncthreads();
  combinePiece<T, K, false>(fn, s, out, reinterpret_cast<T*>(sh.stage[0]), reinterpret_cast<const T*>(sh.stage[1]), src,
                            n);
  __syncthreads();
  if (s.desc.nSend > 0) {
    if (dst) copyPiece(dst, out, n);
    for (int i = 0; i < s.desc.nSend; ++i) {
      const DevFifo& f = P.fifos[s.desc.send[i]];
      llWrite(f, *f.position, sh.stage[2], bytes);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < s.desc.nSend; ++i) advanceLL(P.fifos[s.desc.send[i]]);
    for (int i = 0; i < s.desc.nRecv; ++i) releaseSlot(P.fifos[s.desc.recv[i]]);
  }
  return true;
}

// Step i of a segment, with its offsets as pointers (elements of T; a
// byte-copy launch has T = uint8_t and byte segments).
template <typename T>
__device__ __forceinline__ DevStep resolveStep(const LaneParams& P, const sched::Segment& seg, uint64_t i) {
  const int32_t* table = seg.ringTable >= 0 ? P.rankTable + seg.ringTable : nullptr;
  DevStep s;
  s.desc = sched::segmentStep(seg, table, i);
  s.task = seg.task;
  const T* in = static_cast<const T*>(step::inputBuffer(s.desc, seg.src, seg.dst));
  s.src = in ? in + s.desc.srcOff : nullptr;
  s.dst = step::hasOutput(s.desc) ? static_cast<T*>(seg.dst) + s.desc.dstOff : nullptr;
  return s;
}

// Runs one step piece by piece; false when the launch must stop.
template <typename T, ReduceKind K, typename Fn>
__device__ bool runStep(const LaneParams& P, const DevLane& lane, const Fn& fn, const DevStep& s, LaneShared& sh,
                        Waiter& w) {
  if (step::sendsZeroCopy(s.desc, true)) {  // the translator kept `direct` only where the peer reads our memory
    if (!directSend(P, s, sizeof(T), sh, w)) return false;
    w.progressed();
    __syncthreads();  // thread 0 advanced the position
    return true;
  }
  for (uint64_t done = 0; done < s.desc.count;) {
    const uint64_t n = step::nextPiece(s.desc, lane.pieceBytes, sizeof(T), done);
    const size_t moved = lane.protocol == Protocol::LL ? (llPiece<T, K>(P, fn, s, done, n, sh, w) ? n : 0)
                                                       : simplePiece<T, K>(P, fn, s, done, n, sh, w);
    if (moved == 0) return false;
    done += moved;
    w.progressed();
    __syncthreads();  // thread 0 advanced positions; everyone reads them next piece
  }
  return true;
}

// Thread 0 at the end of a lane: waits until the receivers took every slot
// of the send ends the lane drains (DevFifo::drainBy), so that a peer whose
// call differs has checked the fingerprints before this rank reports
// success (the host executor's sendsTaken). False when the lane must stop.
__device__ inline bool drainSends(const LaneParams& P, Waiter& w) {
  for (int i = 0; i < P.L.nFifos; ++i) {
    const DevFifo& f = P.fifos[i];
    if (f.drainBy != static_cast<int>(blockIdx.x)) continue;
    const uint64_t pos = *f.position;
    while (!fifo::allFreed(pos, loadAcquireSys(f.head)))
      if (!w.keepWaiting(f, false)) return false;
  }
  return true;
}

// The launch's reduction functor: PreMulSum's scalar from device memory or
// the header's copy of a host scalar, SumPostDiv's divisor.
template <typename T, ReduceKind K>
__device__ __forceinline__ auto launchFunctor(const LaneParams& P) {
  const void* scalar = P.L.scalar != nullptr ? P.L.scalar : static_cast<const void*>(&P.L.scalarBits);
  return FunctorOf<T, K>::make(scalar, P.L.divisor);
}

template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kLaneMaxThreads) laneKernel(const __grid_constant__ LaneParams P) {
  __shared__ LaneShared sh;
  if (threadIdx.x == 0) sh.failed = 0;
  __syncthreads();
  const DevLane lane = P.lanes[blockIdx.x];
  const auto fn = launchFunctor<T, K>(P);
  Waiter w(P, &sh.failed);
  for (uint32_t g = 0; g < lane.nSegments; ++g) {
    const sched::Segment& seg = P.segments[lane.firstSegment + g];
    const uint64_t nSteps = sched::segmentSteps(seg);
    for (uint64_t i = 0; i < nSteps; ++i)
      if (!runStep<T, K>(P, lane, fn, resolveStep<T>(P, seg, i), sh, w)) return;
  }
  if (threadIdx.x == 0 && drainSends(P, w)) w.laneEnded();
}

}  // namespace chorus::dev
