// Exhaustive checks of the 16-bit and 8-bit float conversions in
// kernels/common/float_types.h against a reference written independently here:
// decoding with ldexp in double, encoding by searching the sorted list of all
// representable values for the nearest one (ties to the even code).
#include "kernels/common/float_types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace chorus {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// How a format treats the top exponent and out-of-range values.
enum class Overflow { ToInf, Saturate };

struct Format {
  const char* name;
  int expBits;
  int manBits;
  bool fn;  // e4m3 "fn": no infinities, only all-ones is NaN
  Overflow overflow;
  float (*decode)(uint32_t);
  uint32_t (*encode)(float);

  int bits() const { return 1 + expBits + manBits; }
  uint32_t codes() const { return 1u << bits(); }
  int bias() const { return (1 << (expBits - 1)) - 1; }
  uint32_t signBit() const { return 1u << (expBits + manBits); }
  uint32_t expMax() const { return (1u << expBits) - 1; }
  uint32_t manMax() const { return (1u << manBits) - 1; }

  bool isNanCode(uint32_t c) const {
    const uint32_t e = (c >> manBits) & expMax(), m = c & manMax();
    return fn ? (e == expMax() && m == manMax()) : (e == expMax() && m != 0);
  }
  bool isInfCode(uint32_t c) const { return !fn && ((c & ~signBit()) == (expMax() << manBits)); }

  // Value of a code, in double (NaN/inf as such).
  double value(uint32_t c) const {
    const bool neg = (c & signBit()) != 0;
    if (isNanCode(c)) return std::numeric_limits<double>::quiet_NaN();
    if (isInfCode(c)) return neg ? -HUGE_VAL : HUGE_VAL;
    const int e = int((c >> manBits) & expMax());
    const int m = int(c & manMax());
    const double mag = e == 0 ? std::ldexp(m, 1 - bias() - manBits)
                              : std::ldexp((1 << manBits) + m, e - bias() - manBits);
    return neg ? -mag : mag;
  }
};

float decHalf(uint32_t c) { return halfToFloat(half_t{uint16_t(c)}); }
float decBf16(uint32_t c) { return bf16ToFloat(bf16_t{uint16_t(c)}); }
float decE4m3(uint32_t c) { return fp8e4m3ToFloat(fp8e4m3_t{uint8_t(c)}); }
float decE5m2(uint32_t c) { return fp8e5m2ToFloat(fp8e5m2_t{uint8_t(c)}); }
uint32_t encHalf(float f) { return floatToHalf(f).bits; }
uint32_t encBf16(float f) { return floatToBf16(f).bits; }
uint32_t encE4m3(float f) { return floatToFp8e4m3(f).bits; }
uint32_t encE5m2(float f) { return floatToFp8e5m2(f).bits; }

const Format kHalf{"half", 5, 10, false, Overflow::ToInf, decHalf, encHalf};
const Format kBf16{"bf16", 8, 7, false, Overflow::ToInf, decBf16, encBf16};
const Format kE4m3{"e4m3", 4, 3, true, Overflow::Saturate, decE4m3, encE4m3};
const Format kE5m2{"e5m2", 5, 2, false, Overflow::Saturate, decE5m2, encE5m2};

// Reference encoder: nearest representable magnitude, ties to the even code.
class RefEncoder {
 public:
  explicit RefEncoder(const Format& f) : f_(f) {
    for (uint32_t c = 0; c < f.signBit(); ++c) {
      if (!f.isNanCode(c) && !f.isInfCode(c)) {
        values_.push_back(f.value(c));
        codes_.push_back(c);
      }
    }
    // Codes are monotonic in value for non-negative numbers.
    EXPECT_TRUE(std::is_sorted(values_.begin(), values_.end()));
    maxFinite_ = values_.back();
    maxCode_ = codes_.back();
    // The value one step above the largest finite one (where infinity sits
    // for round-to-nearest purposes in IEEE formats).
    beyond_ = maxFinite_ + (maxFinite_ - values_[values_.size() - 2]);
  }

  uint32_t encode(float x) const {
    const uint32_t sign = std::signbit(x) ? f_.signBit() : 0;
    if (std::isnan(x)) return ~0u;  // callers check NaN separately
    const double a = std::fabs(double(x));
    if (std::isinf(x)) return sign | (f_.overflow == Overflow::Saturate && f_.fn ? maxCode_ : infCode());
    if (a > maxFinite_) {
      if (f_.overflow == Overflow::Saturate) return sign | maxCode_;
      return sign | nearest(a, maxFinite_, maxCode_, beyond_, infCode());
    }
    const size_t hi = size_t(std::lower_bound(values_.begin(), values_.end(), a) - values_.begin());
    if (values_[hi] == a) return sign | codes_[hi];
    return sign | nearest(a, values_[hi - 1], codes_[hi - 1], values_[hi], codes_[hi]);
  }

  const std::vector<double>& values() const { return values_; }
  double beyond() const { return beyond_; }

 private:
  uint32_t infCode() const { return f_.expMax() << f_.manBits; }
  static uint32_t nearest(double a, double lo, uint32_t loCode, double hi, uint32_t hiCode) {
    const double dl = a - lo, dh = hi - a;
    if (dl < dh) return loCode;
    if (dh < dl) return hiCode;
    return (loCode & 1) == 0 ? loCode : hiCode;
  }

  const Format& f_;
  std::vector<double> values_;
  std::vector<uint32_t> codes_;
  double maxFinite_ = 0, beyond_ = 0;
  uint32_t maxCode_ = 0;
};

void expectEncodes(const Format& f, const RefEncoder& ref, float x) {
  const uint32_t got = f.encode(x);
  if (std::isnan(x)) {
    ASSERT_TRUE(f.isNanCode(got)) << f.name << " NaN input 0x" << std::hex << bitsOf(x) << " gave 0x" << got;
    ASSERT_EQ((got & f.signBit()) != 0, std::signbit(x)) << f.name << " NaN sign, input 0x" << std::hex << bitsOf(x);
    return;
  }
  ASSERT_EQ(got, ref.encode(x)) << f.name << " encoding " << x << " (0x" << std::hex << bitsOf(x) << ")";
}

class FloatFormatTest : public ::testing::TestWithParam<const Format*> {};

TEST_P(FloatFormatTest, DecodeMatchesReferenceForEveryCode) {
  const Format& f = *GetParam();
  for (uint32_t c = 0; c < f.codes(); ++c) {
    const float got = f.decode(c);
    const double want = f.value(c);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << f.name << " code 0x" << std::hex << c;
      ASSERT_EQ(std::signbit(got), (c & f.signBit()) != 0) << f.name << " code 0x" << std::hex << c;
      continue;
    }
    ASSERT_EQ(double(got), want) << f.name << " code 0x" << std::hex << c;
    ASSERT_EQ(std::signbit(got), (c & f.signBit()) != 0) << f.name << " code 0x" << std::hex << c;
  }
}

TEST_P(FloatFormatTest, EveryCodeRoundTrips) {
  const Format& f = *GetParam();
  for (uint32_t c = 0; c < f.codes(); ++c) {
    const uint32_t back = f.encode(f.decode(c));
    if (f.isNanCode(c)) {
      ASSERT_TRUE(f.isNanCode(back)) << f.name << " code 0x" << std::hex << c;
      ASSERT_EQ(back & f.signBit(), c & f.signBit()) << f.name << " code 0x" << std::hex << c;
    } else {
      ASSERT_EQ(back, c) << f.name << " code 0x" << std::hex << c;
    }
  }
}

// Midpoints between neighbours (ties), and the floats just either side of them.
TEST_P(FloatFormatTest, TiesRoundToEvenAndNeighboursRoundToNearest) {
  const Format& f = *GetParam();
  const RefEncoder ref(f);
  std::vector<double> points = ref.values();
  points.push_back(ref.beyond());
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const double mid = 0.5 * (points[i] + points[i + 1]);
    const float m = float(mid);
    ASSERT_EQ(double(m), mid) << "midpoint must be exact in fp32";
    for (float sign : {1.0f, -1.0f}) {
      const float x = sign * m;
      expectEncodes(f, ref, x);
      expectEncodes(f, ref, std::nextafter(x, 0.0f));
      expectEncodes(f, ref, std::nextafter(x, sign * HUGE_VALF));
    }
  }
  // Both neighbours of a tie are distinct codes, one of them even: the exact
  // midpoint must land on the even one (spot check independent of RefEncoder).
  const float tie = float(0.5 * (ref.values()[1] + ref.values()[2]));  // between codes 1 and 2
  EXPECT_EQ(f.encode(tie), 2u) << f.name;
  const float tie01 = float(0.5 * ref.values()[1]);  // between 0 and the smallest subnormal
  EXPECT_EQ(f.encode(tie01), 0u) << f.name;
}

// A sweep over the whole fp32 space (every 251st pattern; both signs,
// subnormals, NaNs and infinities included).
TEST_P(FloatFormatTest, Fp32SweepMatchesReference) {
  const Format& f = *GetParam();
  const RefEncoder ref(f);
  for (uint64_t u = 0; u <= 0xffffffffull; u += 251) expectEncodes(f, ref, floatOf(uint32_t(u)));
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                     0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu})
    expectEncodes(f, ref, floatOf(u));
}

INSTANTIATE_TEST_SUITE_P(AllFormats, FloatFormatTest, ::testing::Values(&kHalf, &kBf16, &kE4m3, &kE5m2),
                         [](const auto& info) { return std::string(info.param->name); });

// ---- spot checks of the documented edge behaviour ----------------------------

TEST(FloatTypes, HalfEdges) {
  EXPECT_EQ(floatToHalf(65504.0f).bits, 0x7bffu);
  EXPECT_EQ(floatToHalf(65519.99f).bits, 0x7bffu);
  EXPECT_EQ(floatToHalf(65520.0f).bits, 0x7c00u);  // tie goes to even: infinity
  EXPECT_EQ(floatToHalf(-1e9f).bits, 0xfc00u);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)).bits, 0x0001u);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)).bits, 0x0000u);                 // tie to even zero
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)).bits, 0x0002u);                 // 1.5 units -> 2
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)).bits, 0x0400u);              // subnormal carries to normal
  EXPECT_EQ(floatToHalf(2049.0f).bits, floatToHalf(2048.0f).bits);             // tie to even
  EXPECT_EQ(floatToHalf(2051.0f).bits, floatToHalf(2052.0f).bits);             // tie to even (up)
  EXPECT_EQ(floatToHalf(floatOf(0x7fc00000u)).bits, 0x7e00u);
  EXPECT_EQ(floatToHalf(floatOf(0xff800001u)).bits & 0xfe00u, 0xfe00u);         // sNaN becomes quiet
  EXPECT_EQ(bitsOf(halfToFloat(half_t{0x7c01})), 0x7f802000u);                 // payload preserved
  EXPECT_EQ(halfToFloat(half_t{0x0001}), std::ldexp(1.0f, -24));
}

TEST(FloatTypes, Bf16Edges) {
  EXPECT_EQ(floatToBf16(1.0f).bits, 0x3f80u);
  EXPECT_EQ(floatToBf16(floatOf(0x3f808000u)).bits, 0x3f80u);  // tie, even stays
  EXPECT_EQ(floatToBf16(floatOf(0x3f818000u)).bits, 0x3f82u);  // tie, odd rounds up
  EXPECT_EQ(floatToBf16(floatOf(0x7f7fffffu)).bits, 0x7f80u);  // FLT_MAX rounds to infinity
  EXPECT_EQ(floatToBf16(floatOf(0x00008000u)).bits, 0x0000u);  // fp32 subnormal tie -> even 0
  EXPECT_EQ(floatToBf16(floatOf(0x00018000u)).bits, 0x0002u);
  EXPECT_EQ(floatToBf16(floatOf(0x7f800001u)).bits, 0x7fc0u);  // sNaN with low payload stays NaN
  EXPECT_EQ(floatToBf16(floatOf(0xff800000u)).bits, 0xff80u);
}

TEST(FloatTypes, Fp8E4m3Edges) {
  EXPECT_EQ(floatToFp8e4m3(448.0f).bits, 0x7eu);
  EXPECT_EQ(floatToFp8e4m3(464.0f).bits, 0x7eu);  // would round to 480 = NaN code: saturates
  EXPECT_EQ(floatToFp8e4m3(1e30f).bits, 0x7eu);
  EXPECT_EQ(floatToFp8e4m3(-HUGE_VALF).bits, 0xfeu);
  EXPECT_EQ(floatToFp8e4m3(HUGE_VALF).bits, 0x7eu);
  EXPECT_EQ(floatToFp8e4m3(std::nanf("")).bits & 0x7fu, 0x7fu);
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(fp8e4m3_t{0x7f})));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(fp8e4m3_t{0xff})));
  EXPECT_EQ(fp8e4m3ToFloat(fp8e4m3_t{0x78}), 256.0f);  // exponent all ones is a normal binade
  EXPECT_EQ(fp8e4m3ToFloat(fp8e4m3_t{0x01}), std::ldexp(1.0f, -9));
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(1.0f, -10)).bits, 0x00u);  // tie to even zero
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(3.0f, -10)).bits, 0x02u);
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(7.5f, -9)).bits, 0x08u);  // subnormal carries to 2^-6
}

TEST(FloatTypes, Fp8E5m2Edges) {
  EXPECT_EQ(floatToFp8e5m2(57344.0f).bits, 0x7bu);
  EXPECT_EQ(floatToFp8e5m2(61440.0f).bits, 0x7bu);  // finite overflow saturates
  EXPECT_EQ(floatToFp8e5m2(-1e30f).bits, 0xfbu);
  EXPECT_EQ(floatToFp8e5m2(HUGE_VALF).bits, 0x7cu);  // infinity stays infinite
  EXPECT_EQ(floatToFp8e5m2(-HUGE_VALF).bits, 0xfcu);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(floatToFp8e5m2(std::nanf("")))));
  EXPECT_EQ(fp8e5m2ToFloat(fp8e5m2_t{0x01}), std::ldexp(1.0f, -16));
  EXPECT_EQ(floatToFp8e5m2(std::ldexp(1.0f, -17)).bits, 0x00u);
  EXPECT_EQ(floatToFp8e5m2(1.125f).bits, 0x3cu);  // tie between 1.0 (even) and 1.25
  EXPECT_EQ(floatToFp8e5m2(1.375f).bits, 0x3eu);  // tie between 1.25 and 1.5 (even)
}

}  // namespace
}  // namespace chorus
