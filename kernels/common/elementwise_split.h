// How the device's element-wise loop (kernels/primitives/elementwise.cuh)
// splits `n` elements between the `stride` threads of a block or grid, as
// plain index arithmetic the host's tests can run for every thread: each
// element must be touched by exactly one thread exactly once, whatever n,
// the pack size and the thread count.
//
// With vector accesses (`vec`: every pointer 16-byte aligned), elements
// travel in packs of E. Thread `first` takes, in full rounds of
// stride * U packs, the packs p0 + u * stride (u < U) with p0 = round start
// + first, so a round keeps U loads in flight per thread; the packs after
// the last full round one at a time (first, first + stride, ...); and the
// elements after the last whole pack (all of them without `vec`) one at a
// time. The three callbacks receive the round's first pack p0, a pack index
// and an element index.
#pragma once

#include <cstdint>

#include "kernels/common/compiler.h"

namespace chorus::step {

template <int E, int U, typename Round, typename Pack, typename Elem>
CHORUS_HD CHORUS_INLINE void splitElementwise(uint64_t n, bool vec, uint64_t first, uint64_t stride, const Round& round,
                                              const Pack& pack, const Elem& elem) {
  static_assert(E > 0 && U > 0, "packs hold elements and rounds hold packs");
  const uint64_t npacks = vec ? n / E : 0;
  const uint64_t roundPacks = stride * U;
  uint64_t base = 0;
  for (; base + roundPacks <= npacks; base += roundPacks) round(base + first);
  for (uint64_t p = base + first; p < npacks; p += stride) pack(p);
  for (uint64_t i = npacks * E + first; i < n; i += stride) elem(i);
}

}  // namespace chorus::step
