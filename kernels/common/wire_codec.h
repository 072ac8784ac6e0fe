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
#include <cstring>

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

// Runs f(i) for i < n. On the host a whole block's loop has a constant trip
// count, so it vectorizes even under -O2's cheapest cost model; only a
// shard's last block takes the counted loop. The device pass limits
// unrolling: nvcc would unroll every 256-trip loop in full (minutes of
// compile time, several times the code).
template <typename F>
CHORUS_HD CHORUS_INLINE void forBlock(uint32_t n, F&& f) {
#if CHORUS_DEVICE_PASS
#pragma unroll 4
  for (uint32_t i = 0; i < n; ++i) f(i);
#else
  if (n == kWireBlockElems) {
    for (uint32_t i = 0; i < kWireBlockElems; ++i) f(i);
    return;
  }
  for (uint32_t i = 0; i < n; ++i) f(i);
#endif
}

namespace detail {

// Every per-element rule below is straight-line code (selects, no branches,
// no calls), so the block loops vectorize.

CHORUS_HD CHORUS_INLINE bool finite(float v) { return (fp::floatBits(v) & 0x7f800000u) != 0x7f800000u; }
CHORUS_HD CHORUS_INLINE float quietNan() { return fp::bitsFloat(0x7fc00000u); }

// Round to nearest even for |x| < 2^22 in the default rounding mode, without
// a library call (identical on host and device).
CHORUS_HD CHORUS_INLINE float roundEven(float x) {
  const float b = 12582912.0f;  // 1.5 * 2^23 (not folded away: no -ffast-math anywhere)
  return (x + b) - b;
}

CHORUS_HD CHORUS_INLINE uint32_t maxBits(uint32_t a, uint32_t b) { return a > b ? a : b; }

// The block's largest finite magnitude over codeMax. Magnitudes are compared
// as bit patterns (for non-negative floats the integer order is the value
// order), so the loop is an integer max reduction; non-finite elements count
// as 0.
CHORUS_HD CHORUS_INLINE float blockScale(const float* CHORUS_RESTRICT v, uint32_t n, float codeMax) {
  uint32_t mb = 0;
  forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE {
    const uint32_t a = fp::floatBits(v[i]) & 0x7fffffffu;
    mb = maxBits(mb, fp::selectBits(a < 0x7f800000u, a, 0u));
  });
  const float m = fp::bitsFloat(mb);
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

// The codes of scaled formats divide by `d`: the block's scale, or 1 for an
// all-zero block (scale 0), whose finite elements are all +-0 and code 0.
CHORUS_HD CHORUS_INLINE float divisorOf(float scale) { return scale == 0.0f ? 1.0f : scale; }

CHORUS_HD CHORUS_INLINE uint8_t int8Code(float v, float d) {
  float q = roundEven(v / d);
  q = q > 127.0f ? 127.0f : q;
  q = q < -127.0f ? -127.0f : q;
  return finite(v) ? uint8_t(int32_t(q)) : uint8_t(0x80u);
}

CHORUS_HD CHORUS_INLINE float int8Value(uint8_t c, float scale) {
  const float x = float(int32_t(int8_t(c))) * scale;
  return fp::bitsFloat(fp::selectBits(c == 0x80u, fp::floatBits(quietNan()), fp::floatBits(x)));
}

// `keep`: 0x7f for an all-zero block (a -0 codes as +0 there), else 0xff.
CHORUS_HD CHORUS_INLINE uint8_t fp8Code(float v, float d, uint8_t keep) {
  const uint32_t c = floatToFp8e4m3(v / d).bits & keep;
  return uint8_t(fp::selectBits(finite(v), c, 0x7fu));
}

CHORUS_HD CHORUS_INLINE float fp8Value(uint8_t c, float scale) { return fp8e4m3ToFloat(fp8e4m3_t{c}) * scale; }

// NaN and infinite inputs round to an all-ones exponent, and so does a finite
// value beyond bf16's range: all travel as NaN.
CHORUS_HD CHORUS_INLINE uint16_t bf16Code(float v) {
  const uint16_t b = floatToBf16(v).bits;
  return (b & 0x7f80u) == 0x7f80u ? uint16_t(0x7fc0u) : b;
}

// Codes in wire order (little endian, as every host and device here is).
CHORUS_HD CHORUS_INLINE void storeU16(uint8_t* p, uint16_t c) { memcpy(p, &c, 2); }
CHORUS_HD CHORUS_INLINE uint16_t loadU16(const uint8_t* p) {
  uint16_t c;
  memcpy(&c, p, 2);
  return c;
}

}  // namespace detail

// Decodes one block of n values from `in`; Accumulate: acc[i] += value,
// else acc[i] = value. Returns the bytes read.
template <bool Accumulate>
CHORUS_HD CHORUS_INLINE uint32_t decodeBlock(Format f, const uint8_t* CHORUS_RESTRICT in, uint32_t n,
                                             float* CHORUS_RESTRICT acc) {
  using namespace detail;
  const auto put = [&](uint32_t i, float x) CHORUS_LAMBDA_INLINE { acc[i] = Accumulate ? acc[i] + x : x; };
  if (f == Format::Bf16) {
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { put(i, bf16ToFloat(bf16_t{loadU16(in + 2 * i)})); });
    return 2 * n;
  }
  const float scale = loadScale(in);
  const uint8_t* CHORUS_RESTRICT codes = in + 4;
  if (f == Format::Int8)
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { put(i, int8Value(codes[i], scale)); });
  else
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { put(i, fp8Value(codes[i], scale)); });
  return 4 + n;
}

// Encodes one block of n <= kWireBlockElems values at `out`; returns the
// bytes written. With `decoded` set, also writes what the receiver will
// decode (for error feedback and the owner's own output).
CHORUS_HD CHORUS_INLINE uint32_t encodeBlock(Format f, const float* CHORUS_RESTRICT v, uint32_t n,
                                             uint8_t* CHORUS_RESTRICT out, float* decoded) {
  using namespace detail;
  uint32_t bytes = 0;
  if (f == Format::Bf16) {
    forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { storeU16(out + 2 * i, bf16Code(v[i])); });
    bytes = 2 * n;
  } else {
    const float scale = blockScale(v, n, f == Format::Int8 ? 127.0f : 448.0f);
    storeScale(out, scale);
    uint8_t* CHORUS_RESTRICT codes = out + 4;
    const float d = divisorOf(scale);
    if (f == Format::Int8) {
      forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { codes[i] = int8Code(v[i], d); });
    } else {
      const uint8_t keep = scale == 0.0f ? 0x7fu : 0xffu;
      forBlock(n, [&](uint32_t i) CHORUS_LAMBDA_INLINE { codes[i] = fp8Code(v[i], d, keep); });
    }
    bytes = 4 + n;
  }
  if (decoded) decodeBlock<false>(f, out, n, decoded);
  return bytes;
}

}  // namespace chorus::wire
