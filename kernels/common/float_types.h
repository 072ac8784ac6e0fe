// Storage types for the 16-bit and 8-bit floating point datatypes, and their
// conversions to and from fp32.
//
// The types are plain structs holding the bit pattern, so they are trivially
// copyable, have no constructors that could differ between host and device,
// and never convert implicitly: arithmetic always goes through fp32 (see
// reduce_ops.h), which is exact for every product and sum of two values of
// these formats before the single rounding on the way back.
//
// Conversions to the narrow formats round to nearest, ties to even. The host
// side is written with integer operations; the device side uses the GPU's
// conversion instructions (cvt.rn.*, sm_80+ for bf16, sm_89+ for fp8, the
// integer code below that), which round the same way, so finite values and
// infinities give the same bits on both sides (tests/gpu checks it); only
// NaN payloads may differ (a NaN stays a NaN):
//   half  (IEEE binary16)  overflow rounds to infinity, NaN stays NaN (quiet).
//   bf16                   overflow rounds to infinity, NaN stays NaN (quiet).
//   fp8 e4m3 ("fn")        no infinities; max finite 448; NaN is S.1111.111.
//                          Finite overflow and infinities saturate to +-448
//                          (the behaviour of CUDA's __NV_SATFINITE).
//   fp8 e5m2               IEEE-like (inf and NaN exist); infinities stay
//                          infinite, finite overflow saturates to +-57344.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/compiler.h"

namespace chorus {

struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};
struct fp8e4m3_t {
  uint8_t bits;
};
struct fp8e5m2_t {
  uint8_t bits;
};

namespace fp {

CHORUS_HD CHORUS_INLINE uint32_t floatBits(float f) {
#if CHORUS_DEVICE_PASS
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

CHORUS_HD CHORUS_INLINE float bitsFloat(uint32_t u) {
#if CHORUS_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// c ? a : b as a bit blend. Both values are computed whatever c is, so the
// compiler cannot move a (possibly trapping) floating-point operation into a
// branch, which would keep a loop over the select from vectorizing.
CHORUS_HD CHORUS_INLINE uint32_t selectBits(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - uint32_t(c);
  return (a & m) | (b & ~m);
}

// v / 2^shift rounded to nearest, ties to even; 1 <= shift <= 31.
CHORUS_HD CHORUS_INLINE uint32_t shiftRoundEven(uint32_t v, int shift) {
  const uint32_t q = v >> shift;
  const uint32_t rem = v & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  return q + ((rem > halfway || (rem == halfway && (q & 1u))) ? 1u : 0u);
}

// Encodes a finite, non-negative fp32 magnitude `a` (bit pattern, sign
// cleared) into a format with M mantissa bits and exponent bias Bias, assuming
// the caller has already handled values beyond the format's range. A carry out
// of the mantissa correctly bumps the exponent (including subnormal -> normal).
template <int M, int Bias>
CHORUS_HD CHORUS_INLINE uint32_t encodeMagnitude(uint32_t a) {
  constexpr uint32_t kMinNormal = uint32_t(127 - Bias + 1) << 23;  // 2^(1-Bias)
  if (a >= kMinNormal) return shiftRoundEven(a - (uint32_t(127 - Bias) << 23), 23 - M);
  // Subnormal result: count units of 2^(1-Bias-M). a's value is m * 2^(e-150).
  const int e = int(a >> 23);
  if (e == 0) return 0;  // fp32 subnormals are far below half a unit of any target
  const int shift = 151 - Bias - M - e;
  if (shift >= 25) return 0;  // below half a unit (ties at exactly half go to even 0)
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return shiftRoundEven(m, shift);
}

// Decodes a non-negative exponent/mantissa pair (finite values only).
template <int M, int Bias>
CHORUS_HD CHORUS_INLINE float decodeMagnitude(uint32_t e, uint32_t m) {
  if (e == 0) {
    // Subnormal: m units of 2^(1-Bias-M); the product is exact in fp32.
    return float(m) * bitsFloat(uint32_t(127 + 1 - Bias - M) << 23);
  }
  return bitsFloat(((e + 127 - Bias) << 23) | (m << (23 - M)));
}

}  // namespace fp

// ---- fp32 -> narrow ---------------------------------------------------------

CHORUS_HD CHORUS_INLINE half_t floatToHalf(float f) {
#if CHORUS_DEVICE_PASS
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return half_t{h};
#endif
  const uint32_t u = fp::floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return half_t{uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};
  if (a >= 0x47800000u) return half_t{uint16_t(sign | 0x7c00u)};  // >= 2^16 (and inf)
  return half_t{uint16_t(sign | fp::encodeMagnitude<10, 15>(a))};
}

CHORUS_HD CHORUS_INLINE bf16_t floatToBf16(float f) {
#if CHORUS_DEVICE_PASS && __CUDA_ARCH__ >= 800
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return bf16_t{h};
#endif
  const uint32_t u = fp::floatBits(f);
  // Same exponent range as fp32: only the mantissa is rounded; overflow
  // carries into the exponent and ends at infinity, as IEEE requires.
  // Written as a select (not an early return) so loops over it vectorize.
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return bf16_t{uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quietNan : rounded)};
}

CHORUS_HD CHORUS_INLINE fp8e4m3_t floatToFp8e4m3(float f) {
#if CHORUS_DEVICE_PASS && __CUDA_ARCH__ >= 890
  uint16_t pair;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(f));
  return fp8e4m3_t{uint8_t(pair & 0xffu)};
#endif
  // Branch-free (every case computed, then selected), so loops over it
  // vectorize; the same results as encodeMagnitude<3, 7> on each range
  // (checked for every fp32 input).
  const uint32_t u = fp::floatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  // Normal results (a >= 2^-6): 20 mantissa bits dropped to nearest even, the
  // exponent rebiased from 127 to 7; a carry out of the mantissa bumps it.
  const uint32_t normal = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - (120u << 3);
  // Subnormal results (a < 2^-6): units of 2^-9. Adding 2^14 (whose ulp is
  // 2^-9) makes the fp32 adder round to nearest even; the low bits are the
  // code, 8 when it rounds up to the smallest normal. fp32 denormals give 0.
  const uint32_t sub = fp::floatBits(fp::bitsFloat(a) + 16384.0f) - 0x46800000u;
  uint32_t code = fp::selectBits(a < 0x3c800000u, sub, normal);
  code = fp::selectBits(a > 0x43e00000u, 0x7eu, code);  // > 448, inf included: saturate
  code = fp::selectBits(a > 0x7f800000u, 0x7fu, code);  // NaN
  return fp8e4m3_t{uint8_t(sign | code)};
}

CHORUS_HD CHORUS_INLINE fp8e5m2_t floatToFp8e5m2(float f) {
#if CHORUS_DEVICE_PASS && __CUDA_ARCH__ >= 890
  // satfinite also turns infinities into the largest finite value; e5m2 keeps them.
  if (isinf(f)) return fp8e5m2_t{uint8_t(f < 0 ? 0xfcu : 0x7cu)};
  uint16_t pair;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(f));
  return fp8e5m2_t{uint8_t(pair & 0xffu)};
#endif
  const uint32_t u = fp::floatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return fp8e5m2_t{uint8_t(sign | 0x7eu)};
  if (a == 0x7f800000u) return fp8e5m2_t{uint8_t(sign | 0x7cu)};
  if (a > 0x47600000u) return fp8e5m2_t{uint8_t(sign | 0x7bu)};  // > 57344
  return fp8e5m2_t{uint8_t(sign | fp::encodeMagnitude<2, 15>(a))};
}

// ---- narrow -> fp32 (always exact) -----------------------------------------

CHORUS_HD CHORUS_INLINE float halfToFloat(half_t h) {
#if CHORUS_DEVICE_PASS
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h.bits));
  return r;
#endif
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t e = (h.bits >> 10) & 0x1fu;
  const uint32_t m = h.bits & 0x3ffu;
  if (e == 0x1f) return fp::bitsFloat(sign | 0x7f800000u | (m << 13));
  return fp::bitsFloat(sign | fp::floatBits(fp::decodeMagnitude<10, 15>(e, m)));
}

CHORUS_HD CHORUS_INLINE float bf16ToFloat(bf16_t h) { return fp::bitsFloat(uint32_t(h.bits) << 16); }

CHORUS_HD CHORUS_INLINE float fp8e4m3ToFloat(fp8e4m3_t v) {
  const uint32_t sign = uint32_t(v.bits & 0x80u) << 24;
  const uint32_t a = v.bits & 0x7fu;
#if CHORUS_DEVICE_PASS && __CUDA_ARCH__ >= 890
  // The hardware's NaN (through binary16) has other bits than the host's
  // 0x7fc00000: take the host's, so both executors give the same bits.
  uint32_t halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(uint16_t(v.bits)));
  const float decoded = halfToFloat(half_t{uint16_t(halves & 0xffffu)});
  return fp::bitsFloat(fp::selectBits(a == 0x7fu, sign | 0x7fc00000u, fp::floatBits(decoded)));
#endif
  // Branch-free like the encoder; the same values as decodeMagnitude<3, 7>.
  const uint32_t normal = (a << 20) + (120u << 23);                      // exponent rebiased 7 -> 127
  const uint32_t sub = fp::floatBits(float(int32_t(a)) * 0.001953125f);  // a units of 2^-9, exact
  uint32_t bits = fp::selectBits(a < 8u, sub, normal);
  bits = fp::selectBits(a == 0x7fu, 0x7fc00000u, bits);
  return fp::bitsFloat(sign | bits);
}

// e5m2 is the upper byte of a binary16 value with the same meaning.
CHORUS_HD CHORUS_INLINE float fp8e5m2ToFloat(fp8e5m2_t v) { return halfToFloat(half_t{uint16_t(v.bits << 8)}); }

}  // namespace chorus
