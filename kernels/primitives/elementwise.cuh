// Elementwise combine of up to two inputs into one output, spread over the
// threads of a block (or of a grid): the device counterpart of the host loops
// in src/host/host_reduce*.cc, with the same per-element semantics because
// both call the functors of kernels/common/reduce_ops.h.
//
// Bandwidth comes from 16-byte accesses: when every pointer is 16-byte
// aligned, each thread loads kUnroll 16-byte packs of each input before it
// computes and stores any, so kUnroll x 2 loads are in flight per thread. The
// ragged end (and unaligned buffers) fall back to one element per thread.
// `stride`/`first` let a caller use the block (first = threadIdx.x, stride =
// blockDim.x) or the whole grid. CgA/CgB select L1-bypassing loads for
// operands that live in connector slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/elementwise_split.h"
#include "kernels/common/reduce_ops.h"

namespace chorus::dev {

inline constexpr int kUnroll = 4;
// One-byte types have 16 elements per pack; two packs per thread keep enough
// loads in flight and halve their (otherwise large) unrolled code.
template <typename T>
inline constexpr int kUnrollFor = sizeof(T) == 1 ? 2 : kUnroll;

template <typename T>
union Pack16 {
  static constexpr int kElems = 16 / sizeof(T);
  uint4 raw;
  T elem[kElems];
};

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Loads of connector slots bypass L1 (ld.global.cg): the peer rewrites a slot
// every time it comes round, and L1 is not coherent with those writes.
template <bool Cg>
__device__ __forceinline__ uint4 loadPack(const uint4* p) {
  if constexpr (Cg)
    return __ldcg(p);
  else
    return *p;
}

template <bool Cg, typename T>
__device__ __forceinline__ T loadElem(const T* p) {
  if constexpr (!Cg) {
    return *p;
  } else {
    using Bits =
        std::conditional_t<sizeof(T) == 1, unsigned char,
                           std::conditional_t<sizeof(T) == 2, unsigned short,
                                              std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>>>;
    const Bits bits = __ldcg(reinterpret_cast<const Bits*>(p));
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
  }
}

// One element: combine a and b, or transform a alone.
template <bool PreA, bool PreB, bool Post, bool Two, typename Fn, typename T>
__device__ __forceinline__ T one(const Fn& fn, T a, T b) {
  if constexpr (Two)
    return applyReduce<PreA, PreB, Post>(fn, a, b);
  else
    return applyTransform<PreA, Post>(fn, a);
}

// Two:  dst[i] = post?(pre_a?(a[i]) (+) pre_b?(b[i]));
// !Two: dst[i] = post?(pre_a?(a[i])) (a copy when neither flag is set; b unused).
template <bool PreA, bool PreB, bool Post, bool CgA, bool CgB, bool Two, typename Fn, typename T>
__device__ __forceinline__ void combineRange(const Fn& fn, T* dst, const T* a, const T* b, size_t n, size_t first,
                                             size_t stride) {
  using P = Pack16<T>;
  constexpr int E = P::kElems;
  constexpr int U = kUnrollFor<T>;
  const bool vec = aligned16(dst) && aligned16(a) && (!Two || aligned16(b));
  const uint4* a4 = reinterpret_cast<const uint4*>(a);
  const uint4* b4 = reinterpret_cast<const uint4*>(b);
  uint4* d4 = reinterpret_cast<uint4*>(dst);
  // Which thread takes which packs and elements: step::splitElementwise
  // (kernels/common/elementwise_split.h, checked on the host for every thread).
  step::splitElementwise<E, U>(
      n, vec, first, stride,
      [&](uint64_t p0) {  // a full round: U packs, all loads before any store
        P va[U], vb[U] = {};
#pragma unroll
        for (int u = 0; u < U; ++u) va[u].raw = loadPack<CgA>(a4 + p0 + u * stride);
        if constexpr (Two) {
#pragma unroll
          for (int u = 0; u < U; ++u) vb[u].raw = loadPack<CgB>(b4 + p0 + u * stride);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          P out;
#pragma unroll
          for (int e = 0; e < E; ++e) out.elem[e] = one<PreA, PreB, Post, Two>(fn, va[u].elem[e], vb[u].elem[e]);
          d4[p0 + u * stride] = out.raw;
        }
      },
      [&](uint64_t p) {  // one pack after the last full round
        P va, vb{}, out;
        va.raw = loadPack<CgA>(a4 + p);
        if constexpr (Two) vb.raw = loadPack<CgB>(b4 + p);
#pragma unroll
        for (int e = 0; e < E; ++e) out.elem[e] = one<PreA, PreB, Post, Two>(fn, va.elem[e], vb.elem[e]);
        d4[p] = out.raw;
      },
      [&](uint64_t i) {  // one element after the last whole pack (or any, unaligned)
        if constexpr (Two)
          dst[i] = applyReduce<PreA, PreB, Post>(fn, loadElem<CgA>(a + i), loadElem<CgB>(b + i));
        else
          dst[i] = applyTransform<PreA, Post>(fn, loadElem<CgA>(a + i));
      });
}

}  // namespace chorus::dev
