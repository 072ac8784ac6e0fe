// Reduction functors, written once for the host executor and the CUDA kernels.
//
// A reduction step on one element is
//     narrow( post?( combine( pre?(widen(a)), pre?(widen(b)) ) ) )
// where
//   widen/narrow  convert between the element type and its compute type
//                 (fp32 for half, bf16 and fp8; the type itself otherwise), so a
//                 narrow float is rounded exactly once per step, when stored;
//   pre           PreMulSum's multiplication by the user's scalar, applied only
//                 to a rank's *local* input (the caller decides which operands);
//   combine       the binary operator (sum, product, max, min);
//   post          SumPostDiv's division by the rank count (ncclAvg), applied
//                 once, to the final value.
// Functors expose the three pieces separately (preOp/combine/postOp) so
// pipelines can apply pre and post exactly where the schedule needs them;
// applyReduce/applyTransform compose them with the flags as template
// arguments, which keeps flag tests out of inner loops.
//
// Integer arithmetic wraps (two's complement) and never invokes signed
// overflow; integer division truncates toward zero. Max/Min of floating types
// propagate NaN: if either operand is NaN the result is NaN (the first NaN
// operand is returned).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/common/compiler.h"
#include "kernels/common/float_types.h"

namespace chorus {

// ---- element type <-> compute type ----------------------------------------

template <typename T>
struct ElemTraits {
  using Compute = T;
  static CHORUS_HD CHORUS_INLINE Compute widen(T x) { return x; }
  static CHORUS_HD CHORUS_INLINE T narrow(Compute x) { return x; }
};
template <>
struct ElemTraits<half_t> {
  using Compute = float;
  static CHORUS_HD CHORUS_INLINE float widen(half_t x) { return halfToFloat(x); }
  static CHORUS_HD CHORUS_INLINE half_t narrow(float x) { return floatToHalf(x); }
};
template <>
struct ElemTraits<bf16_t> {
  using Compute = float;
  static CHORUS_HD CHORUS_INLINE float widen(bf16_t x) { return bf16ToFloat(x); }
  static CHORUS_HD CHORUS_INLINE bf16_t narrow(float x) { return floatToBf16(x); }
};
template <>
struct ElemTraits<fp8e4m3_t> {
  using Compute = float;
  static CHORUS_HD CHORUS_INLINE float widen(fp8e4m3_t x) { return fp8e4m3ToFloat(x); }
  static CHORUS_HD CHORUS_INLINE fp8e4m3_t narrow(float x) { return floatToFp8e4m3(x); }
};
template <>
struct ElemTraits<fp8e5m2_t> {
  using Compute = float;
  static CHORUS_HD CHORUS_INLINE float widen(fp8e5m2_t x) { return fp8e5m2ToFloat(x); }
  static CHORUS_HD CHORUS_INLINE fp8e5m2_t narrow(float x) { return floatToFp8e5m2(x); }
};

template <typename T>
using ComputeOf = typename ElemTraits<T>::Compute;

// ---- arithmetic on compute types ----------------------------------------------

namespace ops {

// Signed integers are added and multiplied as unsigned so overflow wraps
// instead of being undefined; the conversion back is modular in C++20.
template <typename C>
CHORUS_HD CHORUS_INLINE C add(C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(U(a) + U(b)));
  } else {
    return C(a + b);
  }
}

template <typename C>
CHORUS_HD CHORUS_INLINE C mul(C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(U(a) * U(b)));
  } else if constexpr (std::is_integral_v<C> && sizeof(C) < sizeof(int)) {
    // uint8 promotes to int; 255 * 255 still fits, the cast keeps the low bits.
    return C(unsigned(a) * unsigned(b));
  } else {
    return C(a * b);
  }
}

template <typename C>
CHORUS_HD CHORUS_INLINE bool isNan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return x != x;
  } else {
    return false;
  }
}

// `a > b ? a : b`, chosen to match the x86 max instruction's operand order so
// the vectorized host kernels can reproduce it bit for bit (signed zeros too).
template <typename C>
CHORUS_HD CHORUS_INLINE C max(C a, C b) {
  if (isNan(a)) return a;
  if (isNan(b)) return b;
  return a > b ? a : b;
}

template <typename C>
CHORUS_HD CHORUS_INLINE C min(C a, C b) {
  if (isNan(a)) return a;
  if (isNan(b)) return b;
  return a < b ? a : b;
}

// Division by a positive rank count. Integers truncate toward zero.
template <typename C>
CHORUS_HD CHORUS_INLINE C divBy(C x, int divisor) {
  if constexpr (std::is_floating_point_v<C>) {
    return x / C(divisor);
  } else if constexpr (std::is_signed_v<C>) {
    using Wide = std::conditional_t<(sizeof(C) > sizeof(int)), C, int>;
    return C(Wide(x) / Wide(divisor));
  } else {
    using Wide = std::conditional_t<(sizeof(C) > sizeof(unsigned)), C, unsigned>;
    return C(Wide(x) / Wide(unsigned(divisor)));
  }
}

}  // namespace ops

// ---- functors -----------------------------------------------------------------
// Each functor has preOp/combine/postOp on compute values and operator() on
// elements (combine only, rounded once).

template <typename T, typename Derived>
struct FuncBase {
  using Elem = T;
  using Compute = ComputeOf<T>;
  CHORUS_HD CHORUS_INLINE Compute preOp(Compute x) const { return x; }
  CHORUS_HD CHORUS_INLINE Compute postOp(Compute x) const { return x; }
  CHORUS_HD CHORUS_INLINE T operator()(T a, T b) const {
    return ElemTraits<T>::narrow(static_cast<const Derived*>(this)->combine(ElemTraits<T>::widen(a),
                                                                           ElemTraits<T>::widen(b)));
  }
};

template <typename T>
struct FuncSum : FuncBase<T, FuncSum<T>> {
  using Compute = ComputeOf<T>;
  CHORUS_HD CHORUS_INLINE Compute combine(Compute a, Compute b) const { return ops::add(a, b); }
};

template <typename T>
struct FuncProd : FuncBase<T, FuncProd<T>> {
  using Compute = ComputeOf<T>;
  CHORUS_HD CHORUS_INLINE Compute combine(Compute a, Compute b) const { return ops::mul(a, b); }
};

template <typename T>
struct FuncMax : FuncBase<T, FuncMax<T>> {
  using Compute = ComputeOf<T>;
  CHORUS_HD CHORUS_INLINE Compute combine(Compute a, Compute b) const { return ops::max(a, b); }
};

template <typename T>
struct FuncMin : FuncBase<T, FuncMin<T>> {
  using Compute = ComputeOf<T>;
  CHORUS_HD CHORUS_INLINE Compute combine(Compute a, Compute b) const { return ops::min(a, b); }
};

// Sum where each rank's own contribution is first multiplied by `scalar`
// (ncclRedOpCreatePreMulSum). The scalar has the element type; it is widened
// once here.
template <typename T>
struct FuncPreMulSum : FuncBase<T, FuncPreMulSum<T>> {
  using Compute = ComputeOf<T>;
  Compute scalar;
  CHORUS_HD explicit FuncPreMulSum(T s) : scalar(ElemTraits<T>::widen(s)) {}
  CHORUS_HD CHORUS_INLINE Compute preOp(Compute x) const { return ops::mul(x, scalar); }
  CHORUS_HD CHORUS_INLINE Compute combine(Compute a, Compute b) const { return ops::add(a, b); }
};

// Sum whose final value is divided by `divisor` (ncclAvg with divisor = nranks).
template <typename T>
struct FuncSumPostDiv : FuncBase<T, FuncSumPostDiv<T>> {
  using Compute = ComputeOf<T>;
  int divisor;
  CHORUS_HD explicit FuncSumPostDiv(int d) : divisor(d) {}
  CHORUS_HD CHORUS_INLINE Compute combine(Compute a, Compute b) const { return ops::add(a, b); }
  CHORUS_HD CHORUS_INLINE Compute postOp(Compute x) const { return ops::divBy(x, divisor); }
};

// ---- composing a step ----------------------------------------------------------

// One reduction step on elements: pre on the operands whose flag is set,
// combine, post if Post, one rounding.
template <bool PreA, bool PreB, bool Post, typename Fn, typename T>
CHORUS_HD CHORUS_INLINE T applyReduce(const Fn& fn, T a, T b) {
  auto x = ElemTraits<T>::widen(a);
  auto y = ElemTraits<T>::widen(b);
  if constexpr (PreA) x = fn.preOp(x);
  if constexpr (PreB) y = fn.preOp(y);
  auto r = fn.combine(x, y);
  if constexpr (Post) r = fn.postOp(r);
  return ElemTraits<T>::narrow(r);
}

// pre and/or post on a single element (e.g. a rank's first contribution, or the
// final value of an average); identity when neither flag is set.
template <bool Pre, bool Post, typename Fn, typename T>
CHORUS_HD CHORUS_INLINE T applyTransform(const Fn& fn, T a) {
  if constexpr (!Pre && !Post) {
    return a;
  } else {
    auto x = ElemTraits<T>::widen(a);
    if constexpr (Pre) x = fn.preOp(x);
    if constexpr (Post) x = fn.postOp(x);
    return ElemTraits<T>::narrow(x);
  }
}

}  // namespace chorus
