// Internal to host_reduce*.cc: the kernel signature, the mapping from runtime
// flags to compile-time template arguments (types and kinds:
// core/type_dispatch.h), and the portable element loops. The AVX2 file reuses the portable loops for its tails so the
// last few elements are computed by exactly the same code as the fallback.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "core/type_dispatch.h"
#include "host/host_reduce.h"
#include "kernels/common/reduce_ops.h"

namespace chorus::host::detail {

// What a kernel needs from the spec, already validated.
struct KernelArgs {
  const void* scalar;
  int divisor;
};

using ReduceKernel = void (*)(void* dst, const void* a, const void* b, size_t n, const KernelArgs& args);
using TransformKernel = void (*)(void* dst, const void* src, size_t n, const KernelArgs& args);

// PreMulSum's scalar, read at call time. A missing scalar reads as zero so a
// combine of two already-scaled values (no pre flag) never needs one.
template <typename T>
CHORUS_INLINE T readScalar(const KernelArgs& args) {
  T s{};
  if (args.scalar != nullptr) std::memcpy(&s, args.scalar, sizeof s);
  return s;
}

// The scalar functor for (T, K), built from the kernel arguments.
template <typename T, ReduceKind K>
CHORUS_INLINE auto makeFunc(const KernelArgs& args) {
  if constexpr (K == ReduceKind::Sum) {
    return FuncSum<T>{};
  } else if constexpr (K == ReduceKind::Prod) {
    return FuncProd<T>{};
  } else if constexpr (K == ReduceKind::Max) {
    return FuncMax<T>{};
  } else if constexpr (K == ReduceKind::Min) {
    return FuncMin<T>{};
  } else if constexpr (K == ReduceKind::PreMulSum) {
    return FuncPreMulSum<T>(readScalar<T>(args));
  } else {
    return FuncSumPostDiv<T>(args.divisor);
  }
}

// Flags that matter for kind K (others are identities and are dropped so they
// do not multiply instantiations).
template <ReduceKind K>
constexpr bool kUsesPre = K == ReduceKind::PreMulSum;
template <ReduceKind K>
constexpr bool kUsesPost = K == ReduceKind::SumPostDiv;

// Picks Kernel<PreA, PreB, Post>::run for runtime flags. Kernel is a template
// taking the three flags, already bound to T and K.
template <ReduceKind K, template <bool, bool, bool> class Kernel>
ReduceKernel pickReduce(bool preA, bool preB, bool post) {
  if constexpr (kUsesPre<K>) {
    if (preA) return preB ? &Kernel<true, true, false>::run : &Kernel<true, false, false>::run;
    return preB ? &Kernel<false, true, false>::run : &Kernel<false, false, false>::run;
  } else if constexpr (kUsesPost<K>) {
    return post ? &Kernel<false, false, true>::run : &Kernel<false, false, false>::run;
  } else {
    return &Kernel<false, false, false>::run;
  }
}

// ---- portable loops ----------------------------------------------------------
// memcpy keeps unaligned element access well defined; it compiles to plain loads.

template <typename T>
CHORUS_INLINE T loadElem(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
CHORUS_INLINE void storeElem(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

constexpr size_t kPortableBlock = 16;

template <typename T, ReduceKind K, bool PreA, bool PreB, bool Post>
inline void reduceRange(void* dst, const void* a, const void* b, size_t begin, size_t end, const KernelArgs& args) {
  const auto fn = makeFunc<T, K>(args);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  const auto step = [&](size_t i) {
    const size_t off = i * sizeof(T);
    storeElem(d + off, applyReduce<PreA, PreB, Post>(fn, loadElem<T>(x + off), loadElem<T>(y + off)));
  };
  size_t i = begin;
  // Fixed-length blocks let the compiler vectorize the portable loop even
  // under its cheapest cost model (-O2); the rest runs one by one.
  for (; i + kPortableBlock <= end; i += kPortableBlock)
    for (size_t j = 0; j < kPortableBlock; ++j) step(i + j);
  for (; i < end; ++i) step(i);
}

template <typename T, ReduceKind K, bool Pre, bool Post>
inline void transformRange(void* dst, const void* src, size_t begin, size_t end, const KernelArgs& args) {
  const auto fn = makeFunc<T, K>(args);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(src);
  const auto step = [&](size_t i) {
    const size_t off = i * sizeof(T);
    storeElem(d + off, applyTransform<Pre, Post>(fn, loadElem<T>(x + off)));
  };
  size_t i = begin;
  for (; i + kPortableBlock <= end; i += kPortableBlock)
    for (size_t j = 0; j < kPortableBlock; ++j) step(i + j);
  for (; i < end; ++i) step(i);
}

// Kernel selection per instruction set; nullptr when that set has no kernel for
// the combination (the caller falls back to the portable one).
ReduceKernel portableReduceKernel(ncclDataType_t t, ReduceKind k, bool preA, bool preB, bool post);
TransformKernel portableTransformKernel(ncclDataType_t t, ReduceKind k, bool pre, bool post);
ReduceKernel avx2ReduceKernel(ncclDataType_t t, ReduceKind k, bool preA, bool preB, bool post);
TransformKernel avx2TransformKernel(ncclDataType_t t, ReduceKind k, bool pre, bool post);

}  // namespace chorus::host::detail
