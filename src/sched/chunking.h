// Range arithmetic shared by every schedule: how a run of elements is divided
// among channels, rounds and ranks. Pure functions, usable from host code and
// (later) from CUDA kernels, so both executors cut data at the same places and
// produce bit-identical results for the same algorithm and channel count.
#pragma once

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define CHORUS_SCHED_FN __host__ __device__ constexpr inline
#else
#define CHORUS_SCHED_FN constexpr inline
#endif

namespace chorus::sched {

struct Range {
  size_t begin = 0;
  size_t count = 0;
  CHORUS_SCHED_FN size_t end() const { return begin + count; }
};

// Part `index` of `parts` near-equal parts of [0, total): the first
// total % parts parts get one extra element. Every caller that splits the same
// total the same way gets the same boundaries, which is what lets a sender and
// a receiver agree on piece sizes without talking.
CHORUS_SCHED_FN Range splitEven(size_t total, int parts, int index) {
  const size_t base = total / static_cast<size_t>(parts);
  const size_t extra = total % static_cast<size_t>(parts);
  const size_t idx = static_cast<size_t>(index);
  const size_t begin = idx * base + (idx < extra ? idx : extra);
  return Range{begin, base + (idx < extra ? 1 : 0)};
}

// Like splitEven but boundaries fall on multiples of `align` elements (the
// last part takes the remainder), so vector loads stay aligned inside parts.
CHORUS_SCHED_FN Range splitAligned(size_t total, int parts, int index, size_t align) {
  const size_t units = (total + align - 1) / align;
  Range r = splitEven(units, parts, index);
  size_t begin = r.begin * align;
  size_t end = (r.begin + r.count) * align;
  if (begin > total) begin = total;
  if (end > total) end = total;
  return Range{begin, end - begin};
}

// Number of pieces (FIFO slots) a step of `count` elements occupies.
CHORUS_SCHED_FN size_t pieceCount(size_t count, size_t pieceElems) {
  return (count + pieceElems - 1) / pieceElems;
}

CHORUS_SCHED_FN int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace chorus::sched
