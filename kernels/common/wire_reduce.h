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

#include "kernels/common/reduce_kind.h"
#include "kernels/common/reduce_ops.h"
#include "kernels/common/wire_codec.h"

namespace chorus::wire {

// The (element type, reduction) pairs the compressed formats serve: float,
// half and bf16 with sum or avg. Every other pair has the native format only
// (deterministic mode). The one statement of the rule: the wire kernel's
// instances test it at compile time, the API's checks and the GPU launch
// checks at run time through wireCompresses (src/core/wire_support.h).
template <typename T, ReduceKind K>
inline constexpr bool kCompresses = (std::is_same_v<T, float> || std::is_same_v<T, half_t> ||
                                     std::is_same_v<T, bf16_t>)&&(K == ReduceKind::Sum || K == ReduceKind::SumPostDiv);

// The format an instance for (T, K) runs: the one asked for where the pair
// compresses, else the native one (the checks before a call refused any
// other). Both executors pass their format through it, so the compressed
// block code folds away, at compile time, from the instances that never run
// it (most of their compile time).
template <typename T, ReduceKind K>
CHORUS_HD CHORUS_INLINE constexpr Format servedFormat(Format asked) {
  return kCompresses<T, K> ? asked : Format::Native;
}

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
CHORUS_HD CHORUS_INLINE uint32_t sendBlock(Format f, const Fn& fn, bool preMul, const T* CHORUS_RESTRICT x,
                                           float* CHORUS_RESTRICT residual, uint32_t n, uint8_t* CHORUS_RESTRICT out) {
  using C = ComputeOf<T>;
  if (f == Format::Native) {
    if (!preMul) {
      memcpy(out, x, n * sizeof(T));
      return n * uint32_t(sizeof(T));
    }
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE {
      const C v = fn.preOp(ElemTraits<T>::widen(x[i]));
      memcpy(out + i * sizeof(C), &v, sizeof(C));
    });
    return n * uint32_t(sizeof(C));
  }
  if constexpr (std::is_same_v<C, float>) {
    float v[kWireBlockElems], d[kWireBlockElems];
    // Without a residual, + 0 still turns a -0 into +0, as a zero residual does.
    if (residual)
      forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { v[i] = ElemTraits<T>::widen(x[i]) + residual[i]; });
    else
      forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { v[i] = ElemTraits<T>::widen(x[i]) + 0.0f; });
    const uint32_t bytes = encodeBlock(f, v, n, out, residual ? d : nullptr);
    if (residual) forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { residual[i] = detail::feedback(v[i], d[i]); });
    return bytes;
  }
  return 0;
}

// A rank's contribution to one block of a shard of another host, as an fp32
// partial for the rank of its own host that combines the host's
// contributions (the two-level direct reduction of docs/wire.md): x plus
// its residual, exact, and the residual cleared, since nothing was lost.
// Compressed formats only (float, half, bf16 inputs); returns the bytes.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE uint32_t partialBlock(const Fn& fn, const T* CHORUS_RESTRICT x, float* CHORUS_RESTRICT residual,
                                              uint32_t n, uint8_t* CHORUS_RESTRICT out) {
  if constexpr (std::is_same_v<ComputeOf<T>, float>) {
    float v[kWireBlockElems];
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { v[i] = fn.preOp(ElemTraits<T>::widen(x[i])); });
    if (residual)
      forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE {
        v[i] += residual[i];
        residual[i] = 0.0f;
      });
    memcpy(out, v, n * sizeof(float));
    return n * uint32_t(sizeof(float));
  }
  return 0;
}

// Bytes of one fp32 partial block (partialBlock) of n elements.
CHORUS_HD CHORUS_INLINE uint32_t partialBytes(uint32_t n) { return n * uint32_t(sizeof(float)); }

// Bytes of a partial of n elements of T in its compute type (an input marked
// in OwnerBlock::partial): partialBytes for the float-computed types.
template <typename T>
CHORUS_HD CHORUS_INLINE uint64_t computePartialBytes(uint64_t n) {
  return n * sizeof(ComputeOf<T>);
}

// What the owner of a block needs. `in[r]` is rank r's received piece (null
// for the owner itself, whose input is `x`, and for ranks whose contribution
// reaches it inside another rank's), of which this is block `block`: its
// bytes start `block` whole blocks into the piece (inputBlockAt). `partial`,
// when set, marks the inputs that are partials in the compute type
// (partialBlock, chainBlock) rather than blocks in the wire's format. `x`,
// `residual`, `y` and `out` point at this block itself. `out`, when set,
// receives the result's encoding for the gather phase (`outBytes` its
// size). The owner's
// output `y` is what every rank decodes from `out` (or the result rounded to
// T without a gather phase). `lossScale`: nranks for an average, else 1 (the
// result's quantization loss in units of one contribution). `residual`, `y`
// and `out` overlap neither each other nor the inputs.
template <typename T>
struct OwnerBlock {
  Format format;
  bool preMul, post;
  int nranks, self;
  const uint8_t* const* in;
  const uint8_t* partial;  // null: no input is a partial
  uint64_t block;          // this block's index in the pieces of `in`
  const T* x;
  float* residual;  // compressed with error feedback: this block's entries, else null
  uint32_t n;
  T* y;
  uint8_t* out;
  uint32_t outBytes;
  float lossScale;
};

// Where block b.block of rank r's received piece starts.
template <typename T>
CHORUS_HD CHORUS_INLINE const uint8_t* inputBlockAt(const OwnerBlock<T>& b, int r, bool isPartial) {
  const uint64_t whole = isPartial ? computePartialBytes<T>(kWireBlockElems)
                                   : encodedBytes(b.format, nativeScatterBytes<T>(b.preMul), kWireBlockElems);
  return b.in[r] + b.block * whole;
}

// Rank r's contributions (compute type) to the block, into v.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE void contributions(const OwnerBlock<T>& b, const Fn& fn, int r,
                                           ComputeOf<T>* CHORUS_RESTRICT v) {
  using C = ComputeOf<T>;
  const uint32_t n = b.n;
  if (r == b.self) {
    const T* CHORUS_RESTRICT x = b.x;
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { v[i] = fn.preOp(ElemTraits<T>::widen(x[i])); });
    if constexpr (std::is_same_v<C, float>) {
      const float* CHORUS_RESTRICT res = b.residual;
      if (res) forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { v[i] += res[i]; });
    }
    return;
  }
  const bool isPartial = b.partial && b.partial[r];
  const uint8_t* CHORUS_RESTRICT in = inputBlockAt(b, r, isPartial);
  if (isPartial) {
    memcpy(v, in, n * sizeof(C));
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (b.format != Format::Native) {
      decodeBlock<false>(b.format, in, n, v);
      return;
    }
  }
  if (b.preMul) {
    memcpy(v, in, n * sizeof(C));
    return;
  }
  forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE {
    T e;
    memcpy(&e, in + i * sizeof(T), sizeof(T));
    v[i] = ElemTraits<T>::widen(e);
  });
}

// The owner's result from the combined block `acc`: y, the gather phase's
// encoding and the residual. `scratch`: room for one decoded block.
template <typename T>
CHORUS_HD CHORUS_INLINE void ownerResult(OwnerBlock<T>& b, const ComputeOf<T>* CHORUS_RESTRICT acc,
                                         ComputeOf<T>* CHORUS_RESTRICT scratch, T* CHORUS_RESTRICT y) {
  const uint32_t n = b.n;
  b.outBytes = 0;
  if constexpr (std::is_same_v<ComputeOf<T>, float>) {
    if (b.format != Format::Native) {
      if (b.out) b.outBytes = encodeBlock(b.format, acc, n, b.out, scratch);
      const float* CHORUS_RESTRICT result = b.out ? scratch : acc;
      forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { y[i] = ElemTraits<T>::narrow(result[i]); });
      float* CHORUS_RESTRICT res = b.residual;
      const float scale = b.lossScale;
      if (res && b.out)
        forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE {
          res[i] = detail::feedback(acc[i], ElemTraits<T>::widen(y[i])) * scale;
        });
      else if (res)
        forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { res[i] = 0.0f; });
      return;
    }
  }
  forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { y[i] = ElemTraits<T>::narrow(acc[i]); });
  if (b.out) {
    memcpy(b.out, y, n * sizeof(T));
    b.outBytes = n * uint32_t(sizeof(T));
  }
}

// The inputs of a block combined in rank order (the owner's own and every
// rank's whose block it received), into acc; v: scratch for one block.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE void combineInputs(const OwnerBlock<T>& b, const Fn& fn, ComputeOf<T>* CHORUS_RESTRICT acc,
                                           ComputeOf<T>* CHORUS_RESTRICT v) {
  bool first = true;
  for (int r = 0; r < b.nranks; ++r) {
    if (r != b.self && b.in[r] == nullptr) continue;
    contributions(b, fn, r, first ? acc : v);
    if (!first) forBlock(b.n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { acc[i] = fn.combine(acc[i], v[i]); });
    first = false;
  }
  // No input at all (a table that names none, which the plans never make):
  // a defined result rather than stack contents.
  if (first) forBlock(b.n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { acc[i] = ComputeOf<T>(0); });
}

// The owner's combine in rank order 0..n-1, then avg's division, then the result.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE void ownerBlock(OwnerBlock<T>& b, const Fn& fn) {
  using C = ComputeOf<T>;
  C acc[kWireBlockElems], v[kWireBlockElems];
  combineInputs(b, fn, acc, v);
  if (b.post) forBlock(b.n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { acc[i] = fn.postOp(acc[i]); });
  ownerResult(b, acc, v, b.y);
}

// A host's combined contribution to a block of another host's shard: the
// host's fp32 partials and this rank's own input (with its residual) summed
// in fp32, encoded once at `out` as this rank's contribution would be, and
// what the encoding lost kept in the residual. No division (the owner
// divides) and no output. Compressed formats only.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE void hostSumBlock(OwnerBlock<T>& b, const Fn& fn) {
  b.outBytes = 0;
  if constexpr (std::is_same_v<ComputeOf<T>, float>) {
    float acc[kWireBlockElems], v[kWireBlockElems];
    combineInputs(b, fn, acc, v);
    b.outBytes = encodeBlock(b.format, acc, b.n, b.out, b.residual ? v : nullptr);
    float* CHORUS_RESTRICT res = b.residual;
    if (res) forBlock(b.n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { res[i] = detail::feedback(acc[i], v[i]); });
  }
}

// A link of deterministic mode's chain across hosts: the previous host's
// partial (the rank-order combination of every rank before this host) and
// this host's contributions combined in rank order in the compute type, and
// written unrounded at `out` for the next host, so the last host's owner
// (ownerBlock) finishes exactly the combination a single owner would have
// made. No division and no output; native format only (deterministic mode).
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE void chainBlock(OwnerBlock<T>& b, const Fn& fn) {
  using C = ComputeOf<T>;
  C acc[kWireBlockElems], v[kWireBlockElems];
  combineInputs(b, fn, acc, v);
  memcpy(b.out, acc, b.n * sizeof(C));
  b.outBytes = uint32_t(computePartialBytes<T>(b.n));
}

// A gathered block of the result, decoded into the output; returns the bytes read.
template <typename T>
CHORUS_HD CHORUS_INLINE uint32_t gatherBlock(Format f, const uint8_t* CHORUS_RESTRICT in, uint32_t n,
                                             T* CHORUS_RESTRICT y) {
  if (f == Format::Native) {
    memcpy(y, in, n * sizeof(T));
    return n * uint32_t(sizeof(T));
  }
  if constexpr (std::is_same_v<T, float>) {
    return decodeBlock<false>(f, in, n, y);  // straight into the output
  } else if constexpr (std::is_same_v<ComputeOf<T>, float>) {
    float d[kWireBlockElems];
    const uint32_t bytes = decodeBlock<false>(f, in, n, d);
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { y[i] = ElemTraits<T>::narrow(d[i]); });
    return bytes;
  }
  return 0;
}

}  // namespace chorus::wire
