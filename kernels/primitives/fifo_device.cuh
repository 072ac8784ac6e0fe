// The device side of a connector (src/transport/fifo.h has the host side and
// the slot protocol; the counter rules are kernels/common/fifo_counters.h).
// Counters are read with system-scope acquire loads and written with
// system-scope release stores, because the other end may be a kernel on
// another GPU or a proxy thread on the CPU.
//
// Simple: the sender waits for a free slot (tail - head < nslots), the block
//   fills it, then one thread writes sizes[] and the slot's fingerprint
//   (prints), fences and publishes (tail + 1). The receiver waits for
//   tail > head, checks the fingerprint and the size, the block reads the
//   slot (L1-bypassing loads), then one thread frees it (head + 1).
// LL: the sender still waits for a free slot; one thread writes the piece's
//   size (sizes[]) and the slot's fingerprint and fences, then the block
//   publishes each 8-byte line {data, flag} with a single store; the
//   receiver's threads spin on their own lines until the flag equals the
//   piece's (step::llFlag of its position: never 0, the value of zeroed slot
//   memory, and never that of the slot's previous pieces), thread 0 checking
//   the size and the fingerprint once it saw its first line. Only `head` is
//   written. The line format is kernels/common/ll_lines.h.
#pragma once

#include <cuda/atomic>

#include <cstdint>

#include "kernels/common/direct_slot.h"
#include "kernels/common/fifo_counters.h"
#include "kernels/common/ll_lines.h"
#include "kernels/lane_plan.h"
#include "kernels/primitives/wait.cuh"

namespace chorus::dev {

__device__ __forceinline__ uint64_t loadAcquireSys(uint64_t* p) {
  return cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).load(cuda::memory_order_acquire);
}
__device__ __forceinline__ void storeReleaseSys(uint64_t* p, uint64_t v) {
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
}

__device__ __forceinline__ char* slotAt(const DevFifo& f, uint64_t pos) {
  return f.slots + fifo::slotIndex(pos, f.nslots) * static_cast<size_t>(f.slotBytes);
}

// Receiver (one thread): waits until the slot at the end's position is
// published and returns its size in *got. False on abort/timeout.
__device__ inline bool waitPublished(const DevFifo& f, Waiter& w, uint32_t* got) {
  const uint64_t pos = *f.position;
  while (!fifo::slotPublished(pos, loadAcquireSys(f.tail)))
    if (!w.keepWaiting(f, true)) return false;
  *got = cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(f.sizes[fifo::slotIndex(pos, f.nslots)])
             .load(cuda::memory_order_relaxed);
  return true;
}

// Receiver (one thread): waits until the piece at the end's position is
// published, then checks whose it is (the fingerprint of this rank's call
// `mine`) and what it holds (step_rules.h). False on abort/timeout/mismatch.
__device__ inline bool waitFilled(const LaneParams& P, const DevFifo& f, const sched::StepDesc& s, uint32_t bytes,
                                  const OpPrint& mine, Waiter& w) {
  uint32_t got = 0;
  if (!waitPublished(f, w, &got)) return false;
  if (!acceptPrint(P, f, *f.position, mine)) return false;
  if (step::classifySlot(s, got, bytes) != step::SlotHolds::Piece) {
    recordFailure(P.L.status, step::sizeMismatch(blockIdx.x, f.peer, got, bytes));
    return false;
  }
  return true;
}

// Sender (one thread): waits until the slot at the end's position is free.
__device__ inline bool waitEmpty(const DevFifo& f, Waiter& w) {
  const uint64_t pos = *f.position;
  while (!fifo::slotFree(pos, loadAcquireSys(f.head), f.nslots))
    if (!w.keepWaiting(f, false)) return false;
  return true;
}

// Sender (one thread, after the block filled the slot and synchronized):
// the size and the fingerprint of the call the slot belongs to, then the tail.
__device__ inline void publishSimple(const DevFifo& f, uint32_t bytes, const OpPrint& print) {
  const uint64_t pos = *f.position;
  f.sizes[fifo::slotIndex(pos, f.nslots)] = bytes;
  stampSlot(f, pos, print);
  __threadfence_system();
  storeReleaseSys(f.tail, pos + 1);
  *f.position = pos + 1;
}

// Sender of a zero-copy step (one thread): waits until the receiver freed the
// slot at `pos`, i.e. finished reading the sender's buffer. The receiver's
// progress word (`copied` of the descriptor) moving counts as progress, so a
// long copy does not trip the no-progress timeout.
__device__ inline bool waitFreed(const DevFifo& f, uint64_t pos, const volatile uint64_t* copied, Waiter& w) {
  uint64_t seen = 0;
  while (!fifo::slotFreed(pos, loadAcquireSys(f.head))) {
    const uint64_t now = *copied;
    if (now != seen) {
      seen = now;
      w.progressed();
    }
    if (!w.keepWaiting(f, false)) return false;
  }
  return true;
}

// Receiver (one thread, after the block consumed the slot and synchronized).
__device__ inline void releaseSlot(const DevFifo& f) {
  const uint64_t pos = *f.position;
  storeReleaseSys(f.head, pos + 1);
  *f.position = pos + 1;
}

// Sender of an LL piece (one thread, after the block wrote all lines): only
// the position moves; the lines carry their own flags.
__device__ inline void advanceLL(const DevFifo& f) { *f.position += 1; }

// Block-wide: writes `bytes` payload bytes from `stage` (shared memory,
// 4-byte aligned, zero-padded to a multiple of 4) as LL lines
// (kernels/common/ll_lines.h: the format, shared with the host's tests).
__device__ inline void llWrite(const DevFifo& f, uint64_t pos, const uint32_t* stage, uint32_t bytes) {
  volatile uint64_t* lines = reinterpret_cast<volatile uint64_t*>(slotAt(f, pos));
  const uint32_t flag = step::llFlag(pos);
  const uint32_t nlines = step::llLines(bytes);
  for (uint32_t j = threadIdx.x; j < nlines; j += blockDim.x) lines[j] = step::llLine(flag, stage[j]);
}

// Sender of an LL piece (one thread, before the block writes the lines):
// the piece's size and the slot's fingerprint, fenced so that a receiver that
// sees a line of the piece also sees them. The size lets a receiver that
// expects a different piece fail with both sizes instead of spinning on
// lines that never come (or silently taking a prefix of a longer piece).
__device__ inline void stampLL(const DevFifo& f, uint32_t bytes, const OpPrint& print) {
  const uint64_t pos = *f.position;
  f.sizes[fifo::slotIndex(pos, f.nslots)] = bytes;
  if (f.prints != nullptr) stampSlot(f, pos, print);  // an unstamped call clears the slot's print of nslots pieces ago
  __threadfence_system();
}

// Receiver of an LL piece (thread 0, after it saw the piece's first line and
// fenced): the size the sender stamped must be the piece this rank expects.
__device__ inline bool llSizeMatches(const LaneParams& P, const DevFifo& f, uint64_t pos, uint32_t bytes) {
  const uint32_t got = cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(f.sizes[fifo::slotIndex(pos, f.nslots)])
                           .load(cuda::memory_order_relaxed);
  if (got == bytes) return true;
  recordFailure(P.L.status, step::sizeMismatch(blockIdx.x, f.peer, got, bytes));
  return false;
}

// Block-wide: waits for every line of the piece and copies the payload to
// `stage`. Thread 0, once it saw the first line, checks the piece's size and
// the slot's fingerprint against this rank's call `mine` (acceptPrint).
// False if this thread gave up (abort, timeout, mismatch, or the block
// failed).
__device__ inline bool llRead(const LaneParams& P, const DevFifo& f, uint64_t pos, uint32_t* stage, uint32_t bytes,
                              const OpPrint& mine, Waiter& w) {
  const volatile uint64_t* lines = reinterpret_cast<const volatile uint64_t*>(slotAt(f, pos));
  const uint32_t flag = step::llFlag(pos);
  const uint32_t nlines = step::llLines(bytes);
  for (uint32_t j = threadIdx.x; j < nlines; j += blockDim.x) {
    uint64_t line = lines[j];
    while (step::llLineFlag(line) != flag) {
      if (!w.keepWaiting(f, true)) return false;
      line = lines[j];
    }
    stage[j] = step::llLineWord(line);
    if (j == 0) {
      cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
      if (f.prints != nullptr && mine.valid != 0 && !acceptPrint(P, f, pos, mine)) return false;
      if (!llSizeMatches(P, f, pos, bytes)) return false;
    }
  }
  return true;
}

}  // namespace chorus::dev
