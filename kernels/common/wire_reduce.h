// The three block operations of the direct reductions (docs/wire.md), once
// for both executors: what a rank sends for a shard it does not own, how the
// owner combines the contributions in rank order, and how a gathered result
// is decoded. One call handles one wire block (kWireBlockElems elements or
// fewer for the last block of a shard); the executors loop over the blocks of
// a piece, each rank's block at the same offset of its slot
// (wire_codec.h's encodedBytes of the blocks before it).
//
// Compressed formats (float, half, bf16 inputs) combine in fp32. The native
// format is the deterministic mode of every type: contributions travel as
// the element type (PreMulSum: already multiplied by the sender's scalar,
// in the compute type, so the product is not rounded twice), the owner
// combines them in rank order 0..n-1 in the compute type (fp32 for narrow
// floats, the type itself otherwise) and rounds once.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/reduce_ops.h"
#include "kernels/common/wire_codec.h"

namespace chorus::wire {

// Bytes per element of native payloads: the scatter phase carries the
// compute type for PreMulSum, the gather phase always the element type.
template <typename T>
CHORUS_HD CHORUS_INLINE uint32_t nativeScatterBytes(bool preMul) {
  return preMul ? uint32_t(sizeof(ComputeOf<T>)) : uint32_t(sizeof(T));
}

namespace detail {

CHORUS_HD CHORUS_INLINE float feedback(float exact, float sent) {
  const float e = exact - sent;
  return finite(e) ? e : 0.0f;  // a NaN or infinity must not stick in the residual
}

}  // namespace detail

// A rank's contribution to one block of another rank's shard, encoded at
// `out`; returns the bytes written. With `residual` (compressed only), the
// block sent is Q(x + residual) and residual becomes what Q lost.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE uint32_t sendBlock(Format f, const Fn& fn, bool preMul, const T* x, float* residual, uint32_t n,
                                           uint8_t* out) {
  using C = ComputeOf<T>;
  if (f == Format::Native) {
    if (!preMul) {
      memcpy(out, x, n * sizeof(T));
      return n * uint32_t(sizeof(T));
    }
    for (uint32_t i = 0; i < n; ++i) {
      const C v = fn.preOp(ElemTraits<T>::widen(x[i]));
      memcpy(out + i * sizeof(C), &v, sizeof(C));
    }
    return n * uint32_t(sizeof(C));
  }
  if constexpr (std::is_same_v<C, float>) {
    float v[kWireBlockElems], d[kWireBlockElems];
    for (uint32_t i = 0; i < n; ++i) v[i] = ElemTraits<T>::widen(x[i]) + (residual ? residual[i] : 0.0f);
    const uint32_t bytes = encodeBlock(f, v, n, out, residual ? d : nullptr);
    if (residual)
      for (uint32_t i = 0; i < n; ++i) residual[i] = detail::feedback(v[i], d[i]);
    return bytes;
  }
  return 0;
}

// What the owner of a block needs. `in[r]` is rank r's received block (null
// for the owner itself, whose input is `x`); `out`, when set, receives the
// result's encoding for the gather phase (`outBytes` its size). The owner's
// output `y` is what every rank decodes from `out` (or the result rounded to
// T without a gather phase). `lossScale`: nranks for an average, else 1 (the
// result's quantization loss in units of one contribution).
template <typename T>
struct OwnerBlock {
  Format format;
  bool preMul, post;
  int nranks, self;
  const uint8_t* const* in;
  const T* x;
  float* residual;  // compressed with error feedback: this block's entries, else null
  uint32_t n;
  T* y;
  uint8_t* out;
  uint32_t outBytes;
  float lossScale;
};

// The rank-r contribution (compute type) to element i of the block.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE ComputeOf<T> contribution(const OwnerBlock<T>& b, const Fn& fn, int r, uint32_t i,
                                                  const float* decoded) {
  using C = ComputeOf<T>;
  if (r == b.self) {
    C v = fn.preOp(ElemTraits<T>::widen(b.x[i]));
    if constexpr (std::is_same_v<C, float>)
      if (b.residual) v += b.residual[i];
    return v;
  }
  if (b.format != Format::Native) return C(decoded[i]);
  if (b.preMul) {
    C v;
    memcpy(&v, b.in[r] + i * sizeof(C), sizeof(C));
    return v;
  }
  T v;
  memcpy(&v, b.in[r] + i * sizeof(T), sizeof(T));
  return ElemTraits<T>::widen(v);
}

template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE void ownerBlock(OwnerBlock<T>& b, const Fn& fn) {
  using C = ComputeOf<T>;
  C acc[kWireBlockElems];
  float decoded[kWireBlockElems];
  for (int r = 0; r < b.nranks; ++r) {
    if (r != b.self && b.format != Format::Native) decodeBlock<false>(b.format, b.in[r], b.n, decoded);
    for (uint32_t i = 0; i < b.n; ++i) {
      const C v = contribution(b, fn, r, i, decoded);
      acc[i] = r == 0 ? v : fn.combine(acc[i], v);
    }
  }
  if (b.post)
    for (uint32_t i = 0; i < b.n; ++i) acc[i] = fn.postOp(acc[i]);
  b.outBytes = 0;
  if constexpr (std::is_same_v<C, float>) {
    if (b.format != Format::Native) {
      if (b.out) b.outBytes = encodeBlock(b.format, acc, b.n, b.out, decoded);
      for (uint32_t i = 0; i < b.n; ++i) {
        b.y[i] = ElemTraits<T>::narrow(b.out ? decoded[i] : acc[i]);
        if (b.residual)
          b.residual[i] = b.out ? detail::feedback(acc[i], ElemTraits<T>::widen(b.y[i])) * b.lossScale : 0.0f;
      }
      return;
    }
  }
  for (uint32_t i = 0; i < b.n; ++i) b.y[i] = ElemTraits<T>::narrow(acc[i]);
  if (b.out) {
    memcpy(b.out, b.y, b.n * sizeof(T));
    b.outBytes = b.n * uint32_t(sizeof(T));
  }
}

// A gathered block of the result, decoded into the output; returns the bytes read.
template <typename T>
CHORUS_HD CHORUS_INLINE uint32_t gatherBlock(Format f, const uint8_t* in, uint32_t n, T* y) {
  if (f == Format::Native) {
    memcpy(y, in, n * sizeof(T));
    return n * uint32_t(sizeof(T));
  }
  if constexpr (std::is_same_v<ComputeOf<T>, float>) {
    float d[kWireBlockElems];
    const uint32_t bytes = decodeBlock<false>(f, in, n, d);
    for (uint32_t i = 0; i < n; ++i) y[i] = ElemTraits<T>::narrow(d[i]);
    return bytes;
  }
  return 0;
}

}  // namespace chorus::wire
