// Wire formats of the compressed reductions (chorusWire_t, docs/wire.md),
// written once for the host executor (src/host/wire_exec.cc) and the CUDA
// lane kernel. Values are quantized in blocks of kWireBlockElems elements;
// a block's encoding is self-contained (its fp32 scale first, then one code
// per element), so a connector slot holds whole blocks and the scale always
// travels in the same slot as its codes. The last block of a shard may be
// partial.
//
//   bf16   one bf16 per element (round to nearest even), no scale
//   fp8    scale = absmax / 448, codes e4m3 "fn" of v / scale (nearest even)
//   int8   scale = absmax / 127, codes round(v / scale) in -127..127
//
// The wire carries no infinities: a non-finite input element (NaN or +-Inf)
// travels as a NaN code (bf16 NaN, e4m3 0x7f, int8 -128) and decodes as NaN;
// the scale ignores it, so the other elements of its block are unaffected.
// An all-zero block has scale 0 and decodes to zeros. A block whose absmax is
// so small that absmax / 127 underflows gets the smallest positive scale.
#pragma once

#include <cstdint>

#include "kernels/common/compiler.h"
#include "kernels/common/float_types.h"

namespace chorus::wire {

// Values of chorusWire_t.
enum class Format : uint8_t { Native = 0, Bf16 = 1, Fp8 = 2, Int8 = 3 };
inline constexpr int kNumFormats = 4;

inline constexpr uint32_t kWireBlockElems = 256;

CHORUS_HD CHORUS_INLINE bool compressed(Format f) { return f != Format::Native; }

// Bytes before a block's codes (its scale), and per code.
CHORUS_HD CHORUS_INLINE uint32_t headerBytes(Format f) { return f == Format::Fp8 || f == Format::Int8 ? 4u : 0u; }
CHORUS_HD CHORUS_INLINE uint32_t codeBytes(Format f, uint32_t nativeBytes) {
  switch (f) {
    case Format::Bf16:
      return 2;
    case Format::Fp8:
    case Format::Int8:
      return 1;
    default:
      return nativeBytes;
  }
}

// Encoded bytes of `n` elements cut into blocks from the first one.
// `nativeBytes`: the element size of Native payloads.
CHORUS_HD CHORUS_INLINE uint64_t encodedBytes(Format f, uint32_t nativeBytes, uint64_t n) {
  const uint64_t blocks = (n + kWireBlockElems - 1) / kWireBlockElems;
  return blocks * headerBytes(f) + n * codeBytes(f, nativeBytes);
}

// Whole blocks of elements one slot of `slotBytes` carries (at least one).
CHORUS_HD CHORUS_INLINE uint64_t pieceElemsFor(Format f, uint32_t nativeBytes, uint32_t slotBytes) {
  const uint64_t block = encodedBytes(f, nativeBytes, kWireBlockElems);
  const uint64_t blocks = slotBytes / block;
  return (blocks > 0 ? blocks : 1) * kWireBlockElems;
}

namespace detail {

CHORUS_HD CHORUS_INLINE bool finite(float v) { return (fp::floatBits(v) & 0x7f800000u) != 0x7f800000u; }
CHORUS_HD CHORUS_INLINE float absf(float v) { return fp::bitsFloat(fp::floatBits(v) & 0x7fffffffu); }
CHORUS_HD CHORUS_INLINE float quietNan() { return fp::bitsFloat(0x7fc00000u); }

// Round to nearest even for |x| < 2^22 in the default rounding mode, without
// a library call (identical on host and device).
CHORUS_HD CHORUS_INLINE float roundEven(float x) {
  const float b = 12582912.0f;  // 1.5 * 2^23 (not folded away: no -ffast-math anywhere)
  return (x + b) - b;
}

CHORUS_HD CHORUS_INLINE float blockScale(const float* v, uint32_t n, float codeMax) {
  float m = 0.0f;
  for (uint32_t i = 0; i < n; ++i) {
    const float a = absf(v[i]);
    m = finite(v[i]) && a > m ? a : m;
  }
  const float s = m / codeMax;
  return s == 0.0f && m > 0.0f ? fp::bitsFloat(1u) : s;
}

CHORUS_HD CHORUS_INLINE void storeScale(uint8_t* out, float s) {
  const uint32_t u = fp::floatBits(s);
  for (int i = 0; i < 4; ++i) out[i] = uint8_t(u >> (8 * i));
}

CHORUS_HD CHORUS_INLINE float loadScale(const uint8_t* in) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u |= uint32_t(in[i]) << (8 * i);
  return fp::bitsFloat(u);
}

CHORUS_HD CHORUS_INLINE uint8_t int8Code(float v, float scale) {
  if (!finite(v)) return 0x80u;
  if (scale == 0.0f) return 0;
  float q = roundEven(v / scale);
  q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
  return uint8_t(int8_t(q));
}

CHORUS_HD CHORUS_INLINE float int8Value(uint8_t c, float scale) {
  return c == 0x80u ? quietNan() : float(int8_t(c)) * scale;
}

CHORUS_HD CHORUS_INLINE uint8_t fp8Code(float v, float scale) {
  if (!finite(v)) return 0x7fu;
  if (scale == 0.0f) return 0;
  return floatToFp8e4m3(v / scale).bits;
}

CHORUS_HD CHORUS_INLINE float fp8Value(uint8_t c, float scale) { return fp8e4m3ToFloat(fp8e4m3_t{c}) * scale; }

CHORUS_HD CHORUS_INLINE uint16_t bf16Code(float v) {
  if (!finite(v)) return 0x7fc0u;
  const bf16_t b = floatToBf16(v);
  return (b.bits & 0x7f80u) == 0x7f80u ? uint16_t(0x7fc0u) : b.bits;  // overflow to inf: NaN
}

}  // namespace detail

// Encodes one block of n <= kWireBlockElems values at `out`; returns the
// bytes written. With `decoded` set, also writes what the receiver will
// decode (for error feedback and the owner's own output).
CHORUS_HD CHORUS_INLINE uint32_t encodeBlock(Format f, const float* v, uint32_t n, uint8_t* out, float* decoded) {
  using namespace detail;
  if (f == Format::Bf16) {
    for (uint32_t i = 0; i < n; ++i) {
      const uint16_t c = bf16Code(v[i]);
      out[2 * i] = uint8_t(c);
      out[2 * i + 1] = uint8_t(c >> 8);
      if (decoded) decoded[i] = bf16ToFloat(bf16_t{c});
    }
    return 2 * n;
  }
  const bool i8 = f == Format::Int8;
  const float scale = blockScale(v, n, i8 ? 127.0f : 448.0f);
  storeScale(out, scale);
  uint8_t* codes = out + 4;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t c = i8 ? int8Code(v[i], scale) : fp8Code(v[i], scale);
    codes[i] = c;
    if (decoded) decoded[i] = i8 ? int8Value(c, scale) : fp8Value(c, scale);
  }
  return 4 + n;
}

// Decodes one block of n values from `in`; Accumulate: acc[i] += value,
// else acc[i] = value. Returns the bytes read.
template <bool Accumulate>
CHORUS_HD CHORUS_INLINE uint32_t decodeBlock(Format f, const uint8_t* in, uint32_t n, float* acc) {
  using namespace detail;
  if (f == Format::Bf16) {
    for (uint32_t i = 0; i < n; ++i) {
      const float x = bf16ToFloat(bf16_t{uint16_t(in[2 * i] | (uint16_t(in[2 * i + 1]) << 8))});
      acc[i] = Accumulate ? acc[i] + x : x;
    }
    return 2 * n;
  }
  const bool i8 = f == Format::Int8;
  const float scale = loadScale(in);
  const uint8_t* codes = in + 4;
  for (uint32_t i = 0; i < n; ++i) {
    const float x = i8 ? int8Value(codes[i], scale) : fp8Value(codes[i], scale);
    acc[i] = Accumulate ? acc[i] + x : x;
  }
  return 4 + n;
}

}  // namespace chorus::wire
