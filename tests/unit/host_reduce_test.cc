// host::reduce / host::transform against a scalar reference written here, for
// every datatype x kind x flag combination, several sizes (vector bodies and
// tails), aliasing (dst == a, dst == b, dst == src), misaligned pointers, and
// both the portable and the AVX2 loops. Guard bytes after each output catch
// writes past the end.
#include "host/host_reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/float_types.h"

namespace chorus {
namespace host {
// Readable parameter values in gtest failure messages.
inline void PrintTo(SimdLevel level, std::ostream* os) { *os << (level == SimdLevel::Avx2 ? "Avx2" : "Portable"); }
}  // namespace host

namespace {

using host::SimdLevel;

constexpr ReduceKind kKinds[] = {ReduceKind::Sum, ReduceKind::Prod, ReduceKind::Max,
                                 ReduceKind::Min, ReduceKind::PreMulSum, ReduceKind::SumPostDiv};
constexpr size_t kSizes[] = {0, 1, 7, 33, 1001, 4133};
constexpr unsigned char kGuard = 0xa5;
constexpr size_t kGuardBytes = 64;

const char* kindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum: return "Sum";
    case ReduceKind::Prod: return "Prod";
    case ReduceKind::Max: return "Max";
    case ReduceKind::Min: return "Min";
    case ReduceKind::PreMulSum: return "PreMulSum";
    case ReduceKind::SumPostDiv: return "SumPostDiv";
  }
  return "?";
}

// ---- the reference model ------------------------------------------------------
// Narrow floats: widen to float, compute in float, narrow once. Integers: the
// arithmetic is done on uint64 (mod 2^64 agrees with mod 2^k after truncation).

template <typename T> struct Model;

template <typename T, float (*Widen)(T), T (*Narrow)(float)>
struct NarrowFloatModel {
  using C = float;
  static constexpr bool kFloating = true;
  static C widen(T x) { return Widen(x); }
  static T narrow(C x) { return Narrow(x); }
};
template <> struct Model<half_t> : NarrowFloatModel<half_t, halfToFloat, floatToHalf> {};
template <> struct Model<bf16_t> : NarrowFloatModel<bf16_t, bf16ToFloat, floatToBf16> {};
template <> struct Model<fp8e4m3_t> : NarrowFloatModel<fp8e4m3_t, fp8e4m3ToFloat, floatToFp8e4m3> {};
template <> struct Model<fp8e5m2_t> : NarrowFloatModel<fp8e5m2_t, fp8e5m2ToFloat, floatToFp8e5m2> {};

template <typename T>
struct Model {
  using C = T;
  static constexpr bool kFloating = std::is_floating_point_v<T>;
  static C widen(T x) { return x; }
  static T narrow(C x) { return x; }
};

template <typename C>
C refCombine(ReduceKind k, C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (k) {
      case ReduceKind::Prod: return x * y;
      case ReduceKind::Max: return std::isnan(x) ? x : std::isnan(y) ? y : (x > y ? x : y);
      case ReduceKind::Min: return std::isnan(x) ? x : std::isnan(y) ? y : (x < y ? x : y);
      default: return x + y;
    }
  } else {
    switch (k) {
      case ReduceKind::Prod: return C(uint64_t(x) * uint64_t(y));
      case ReduceKind::Max: return x > y ? x : y;
      case ReduceKind::Min: return x < y ? x : y;
      default: return C(uint64_t(x) + uint64_t(y));
    }
  }
}

template <typename C>
C refPre(C x, C s) {
  if constexpr (std::is_floating_point_v<C>) return x * s;
  else return C(uint64_t(x) * uint64_t(s));
}

template <typename C>
C refPost(C x, int d) {
  if constexpr (std::is_floating_point_v<C>) return x / C(d);
  else if constexpr (std::is_signed_v<C>) return C(int64_t(x) / int64_t(d));
  else return C(uint64_t(x) / uint64_t(d));
}

template <typename T>
T refReduce(ReduceKind k, T a, bool preA, T b, bool preB, bool post, T scalar, int divisor) {
  using M = Model<T>;
  auto x = M::widen(a), y = M::widen(b);
  if (k == ReduceKind::PreMulSum && preA) x = refPre(x, M::widen(scalar));
  if (k == ReduceKind::PreMulSum && preB) y = refPre(y, M::widen(scalar));
  auto r = refCombine(k, x, y);
  if (k == ReduceKind::SumPostDiv && post) r = refPost(r, divisor);
  return M::narrow(r);
}

template <typename T>
T refTransform(ReduceKind k, T a, bool pre, bool post, T scalar, int divisor) {
  using M = Model<T>;
  if (!(k == ReduceKind::PreMulSum && pre) && !(k == ReduceKind::SumPostDiv && post)) return a;
  auto x = M::widen(a);
  if (k == ReduceKind::PreMulSum && pre) x = refPre(x, M::widen(scalar));
  if (k == ReduceKind::SumPostDiv && post) x = refPost(x, divisor);
  return M::narrow(x);
}

// Equal bits, or both NaN for floating types (NaN payloads may differ
// legitimately between x86 conversion instructions and bit arithmetic).
template <typename T>
bool sameResult(T want, T got) {
  if (std::memcmp(&want, &got, sizeof(T)) == 0) return true;
  if constexpr (Model<T>::kFloating) {
    return std::isnan(double(Model<T>::widen(want))) && std::isnan(double(Model<T>::widen(got)));
  }
  return false;
}

template <typename T>
std::string show(T v) {
  if constexpr (sizeof(T) == 1) {
    uint8_t u;
    std::memcpy(&u, &v, 1);
    return std::to_string(u) + (Model<T>::kFloating ? " (" + std::to_string(Model<T>::widen(v)) + ")" : "");
  } else if constexpr (std::is_same_v<T, half_t> || std::is_same_v<T, bf16_t>) {
    return std::to_string(v.bits) + " (" + std::to_string(Model<T>::widen(v)) + ")";
  } else {
    return std::to_string(v);
  }
}

// ---- inputs ---------------------------------------------------------------------

template <typename T>
T fromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// Narrow floats and integers: random bit patterns (every special value
// included). fp32/fp64: mostly values that keep a*s + b*s exact (so the
// answer cannot depend on fused multiply-add), plus NaN, infinities, zeros.
template <typename T>
std::vector<T> makeInputs(size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      const uint64_t r = rng();
      switch (r % 16) {
        case 0: x = std::numeric_limits<T>::quiet_NaN(); break;
        case 1: x = (r & 16) ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity(); break;
        case 2: x = (r & 16) ? T(0) : -T(0); break;
        default: x = T(int64_t(r >> 40) % 4096 - 2048) / T(64); break;
      }
    } else {
      x = fromBits<T>(rng());
    }
  }
  return v;
}

template <typename T>
T makeScalar(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) return T(int(rng() % 61) - 30) / T(8);
  else if constexpr (std::is_same_v<T, half_t>) return floatToHalf(float(int(rng() % 41) - 20) / 16.0f);
  else if constexpr (std::is_same_v<T, bf16_t>) return floatToBf16(float(int(rng() % 41) - 20) / 16.0f);
  else if constexpr (std::is_same_v<T, fp8e4m3_t>) return floatToFp8e4m3(float(int(rng() % 17) - 8) / 4.0f);
  else if constexpr (std::is_same_v<T, fp8e5m2_t>) return floatToFp8e5m2(float(int(rng() % 17) - 8) / 4.0f);
  else return fromBits<T>(rng());
}

// Buffer with room for a misalignment offset and guard bytes after the data.
struct Buffer {
  std::vector<unsigned char> bytes;
  size_t offset;
  Buffer(size_t dataBytes, size_t off) : bytes(dataBytes + off + kGuardBytes + 64, kGuard), offset(off) {}
  unsigned char* data() {
    // Start from a 64-byte aligned address so `offset` is the exact misalignment.
    auto p = reinterpret_cast<uintptr_t>(bytes.data());
    return reinterpret_cast<unsigned char*>((p + 63) & ~uintptr_t(63)) + offset;
  }
};

template <typename T>
void put(unsigned char* p, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(p, v.data(), v.size() * sizeof(T));
}
template <typename T>
T at(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof v);
  return v;
}

::testing::AssertionResult guardIntact(const unsigned char* end) {
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (end[i] != kGuard) return ::testing::AssertionFailure() << "wrote past the end at +" << i;
  return ::testing::AssertionSuccess();
}

enum class Alias { None, DstIsA, DstIsB };

// ---- the matrix ---------------------------------------------------------------

class HostReduceTest : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    if (GetParam() > host::detectedSimdLevel()) GTEST_SKIP() << "CPU lacks this SIMD level";
    previous_ = host::setSimdLevel(GetParam());
    ASSERT_EQ(host::activeSimdLevel(), GetParam());
  }
  void TearDown() override { host::setSimdLevel(previous_); }
  SimdLevel previous_ = SimdLevel::Portable;
};

template <typename T>
void checkReduce(ncclDataType_t type, ReduceKind kind, size_t n, bool preA, bool preB, bool post, Alias alias,
                 size_t misalign, std::mt19937_64& rng) {
  const std::vector<T> a = makeInputs<T>(n, rng), b = makeInputs<T>(n, rng);
  const T scalar = makeScalar<T>(rng);
  const int divisor = 1 + int(rng() % 9);
  const ReduceSpec spec{type, kind, &scalar, divisor};
  const size_t bytes = n * sizeof(T);
  Buffer ba(bytes, misalign), bb(bytes, misalign == 0 ? 0 : misalign + 1), bd(bytes, misalign);
  put(ba.data(), a);
  put(bb.data(), b);
  unsigned char* dst = alias == Alias::DstIsA ? ba.data() : alias == Alias::DstIsB ? bb.data() : bd.data();
  host::reduce(spec, dst, ba.data(), preA, bb.data(), preB, n, post);
  for (size_t i = 0; i < n; ++i) {
    const T want = refReduce(kind, a[i], preA, b[i], preB, post, scalar, divisor);
    const T got = at<T>(dst, i);
    ASSERT_TRUE(sameResult(want, got)) << "type " << type << " " << kindName(kind) << " n=" << n << " i=" << i
                                       << " preA=" << preA << " preB=" << preB << " post=" << post
                                       << " alias=" << int(alias) << " misalign=" << misalign << ": a=" << show(a[i])
                                       << " b=" << show(b[i]) << " scalar=" << show(scalar) << " div=" << divisor
                                       << " want " << show(want) << " got " << show(got);
  }
  ASSERT_TRUE(guardIntact(dst + bytes)) << "type " << type << " n=" << n;
}

template <typename T>
void checkTransform(ncclDataType_t type, ReduceKind kind, size_t n, bool pre, bool post, bool inPlace,
                    size_t misalign, std::mt19937_64& rng) {
  const std::vector<T> src = makeInputs<T>(n, rng);
  const T scalar = makeScalar<T>(rng);
  const int divisor = 1 + int(rng() % 9);
  const ReduceSpec spec{type, kind, &scalar, divisor};
  const size_t bytes = n * sizeof(T);
  Buffer bs(bytes, misalign), bd(bytes, misalign == 0 ? 0 : misalign + 1);
  put(bs.data(), src);
  unsigned char* dst = inPlace ? bs.data() : bd.data();
  host::transform(spec, dst, bs.data(), pre, n, post);
  for (size_t i = 0; i < n; ++i) {
    const T want = refTransform(kind, src[i], pre, post, scalar, divisor);
    const T got = at<T>(dst, i);
    ASSERT_TRUE(sameResult(want, got)) << "type " << type << " " << kindName(kind) << " n=" << n << " i=" << i
                                       << " pre=" << pre << " post=" << post << " inPlace=" << inPlace
                                       << ": src=" << show(src[i]) << " want " << show(want) << " got " << show(got);
  }
  ASSERT_TRUE(guardIntact(dst + bytes)) << "type " << type << " n=" << n;
}

template <typename T>
void reduceMatrix(ncclDataType_t type) {
  std::mt19937_64 rng(1234 + type);
  for (ReduceKind kind : kKinds)
    for (size_t n : kSizes)
      for (int flags = 0; flags < 8; ++flags)
        for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB})
          for (size_t misalign : {size_t(0), sizeof(T), size_t(1)}) {
            if (misalign == 1 && (sizeof(T) == 1 || n > 1001)) continue;  // byte offsets: a subset suffices
            checkReduce<T>(type, kind, n, flags & 1, flags & 2, flags & 4, alias, misalign, rng);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

template <typename T>
void transformMatrix(ncclDataType_t type) {
  std::mt19937_64 rng(99 + type);
  for (ReduceKind kind : kKinds)
    for (size_t n : kSizes)
      for (int flags = 0; flags < 4; ++flags)
        for (bool inPlace : {false, true})
          for (size_t misalign : {size_t(0), size_t(1)}) {
            checkTransform<T>(type, kind, n, flags & 1, flags & 2, inPlace, misalign, rng);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

#define CHORUS_FOR_EACH_TYPE(X)                                                                        \
  X(Int8, int8_t, ncclInt8) X(Uint8, uint8_t, ncclUint8) X(Int32, int32_t, ncclInt32)                  \
  X(Uint32, uint32_t, ncclUint32) X(Int64, int64_t, ncclInt64) X(Uint64, uint64_t, ncclUint64)         \
  X(Half, half_t, ncclFloat16) X(Float, float, ncclFloat32) X(Double, double, ncclFloat64)             \
  X(Bf16, bf16_t, ncclBfloat16) X(Fp8e4m3, fp8e4m3_t, ncclFloat8e4m3) X(Fp8e5m2, fp8e5m2_t, ncclFloat8e5m2)

#define CHORUS_MATRIX_TESTS(Name, T, type)                              \
  TEST_P(HostReduceTest, Reduce##Name) { reduceMatrix<T>(type); }       \
  TEST_P(HostReduceTest, Transform##Name) { transformMatrix<T>(type); }
CHORUS_FOR_EACH_TYPE(CHORUS_MATRIX_TESTS)
#undef CHORUS_MATRIX_TESTS

// Every pair of fp8 values, so the vector encoders see every reachable sum and
// product (rounding, subnormals, saturation, NaN) and must match the scalar one.
template <typename T>
void allPairs(ncclDataType_t type) {
  std::vector<T> a(65536), b(65536), d(65536);
  for (uint32_t i = 0; i < 65536; ++i) a[i] = fromBits<T>(i & 0xff), b[i] = fromBits<T>(i >> 8);
  const T scalar = fromBits<T>(0x3a);
  for (ReduceKind kind : kKinds) {
    const ReduceSpec spec{type, kind, &scalar, 3};
    host::reduce(spec, d.data(), a.data(), true, b.data(), false, d.size(), true);
    for (uint32_t i = 0; i < 65536; ++i) {
      const T want = refReduce(kind, a[i], true, b[i], false, true, scalar, 3);
      ASSERT_TRUE(sameResult(want, d[i])) << kindName(kind) << " a=" << show(a[i]) << " b=" << show(b[i])
                                          << " want " << show(want) << " got " << show(d[i]);
    }
  }
}
TEST_P(HostReduceTest, Fp8e4m3AllPairs) { allPairs<fp8e4m3_t>(ncclFloat8e4m3); }
TEST_P(HostReduceTest, Fp8e5m2AllPairs) { allPairs<fp8e5m2_t>(ncclFloat8e5m2); }

// Random 16-bit pairs: far more rounding cases than the matrix.
template <typename T>
void randomPairs(ncclDataType_t type) {
  std::mt19937_64 rng(7);
  const size_t n = 1 << 18;
  std::vector<T> a(n), b(n), d(n);
  for (size_t i = 0; i < n; ++i) a[i] = fromBits<T>(rng() & 0xffff), b[i] = fromBits<T>(rng() & 0xffff);
  for (ReduceKind kind : kKinds) {
    const T scalar = makeScalar<T>(rng);
    const ReduceSpec spec{type, kind, &scalar, 7};
    host::reduce(spec, d.data(), a.data(), false, b.data(), true, n, true);
    for (size_t i = 0; i < n; ++i) {
      const T want = refReduce(kind, a[i], false, b[i], true, true, scalar, 7);
      ASSERT_TRUE(sameResult(want, d[i])) << kindName(kind) << " a=" << show(a[i]) << " b=" << show(b[i])
                                          << " want " << show(want) << " got " << show(d[i]);
    }
  }
}
TEST_P(HostReduceTest, HalfRandomPairs) { randomPairs<half_t>(ncclFloat16); }
TEST_P(HostReduceTest, Bf16RandomPairs) { randomPairs<bf16_t>(ncclBfloat16); }

// ---- fixed expectations (independent of the reference model) -----------------

template <typename T>
std::vector<T> run(ncclDataType_t type, ReduceKind kind, std::vector<T> a, std::vector<T> b, bool post = false,
                   int divisor = 1, const void* scalar = nullptr, bool pre = false) {
  const ReduceSpec spec{type, kind, scalar, divisor};
  std::vector<T> d(a.size());
  host::reduce(spec, d.data(), a.data(), pre, b.data(), pre, a.size(), post);
  return d;
}

// 20 elements: a vector body plus a scalar tail for most lane widths.
template <typename T>
std::vector<T> rep(T v, size_t n = 20) {
  return std::vector<T>(n, v);
}

TEST_P(HostReduceTest, IntegerAvgTruncatesTowardZero) {
  for (int32_t v : run<int32_t>(ncclInt32, ReduceKind::SumPostDiv, rep(-7), rep(0), true, 2)) EXPECT_EQ(v, -3);
  for (int64_t v : run<int64_t>(ncclInt64, ReduceKind::SumPostDiv, rep<int64_t>(-7), rep<int64_t>(0), true, 2))
    EXPECT_EQ(v, -3);
  for (int8_t v : run<int8_t>(ncclInt8, ReduceKind::SumPostDiv, rep<int8_t>(-100, 70), rep<int8_t>(-1, 70), true, 3))
    EXPECT_EQ(v, -33);
  for (uint32_t v : run<uint32_t>(ncclUint32, ReduceKind::SumPostDiv, rep(0xfffffffeu), rep(1u), true, 1))
    EXPECT_EQ(v, 0xffffffffu);
  for (uint32_t v : run<uint32_t>(ncclUint32, ReduceKind::SumPostDiv, rep(0xfffffff0u), rep(0u), true, 7))
    EXPECT_EQ(v, 0xfffffff0u / 7);
}

TEST_P(HostReduceTest, IntegerOverflowWraps) {
  const int32_t big = std::numeric_limits<int32_t>::max();
  for (int32_t v : run<int32_t>(ncclInt32, ReduceKind::Sum, rep(big), rep(1))) EXPECT_EQ(v, std::numeric_limits<int32_t>::min());
  for (int32_t v : run<int32_t>(ncclInt32, ReduceKind::Prod, rep(65536), rep(65536))) EXPECT_EQ(v, 0);
  for (int8_t v : run<int8_t>(ncclInt8, ReduceKind::Prod, rep<int8_t>(-128, 70), rep<int8_t>(-1, 70))) EXPECT_EQ(v, -128);
  for (uint64_t v : run<uint64_t>(ncclUint64, ReduceKind::Prod, rep<uint64_t>(0x100000001ull), rep<uint64_t>(0x100000001ull)))
    EXPECT_EQ(v, 0x200000001ull);
  for (uint64_t v : run<uint64_t>(ncclUint64, ReduceKind::Max, rep<uint64_t>(0x8000000000000000ull), rep<uint64_t>(1)))
    EXPECT_EQ(v, 0x8000000000000000ull);
  for (int64_t v : run<int64_t>(ncclInt64, ReduceKind::Min, rep<int64_t>(-5), rep<int64_t>(3))) EXPECT_EQ(v, -5);
}

TEST_P(HostReduceTest, FloatMaxMinPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceKind k : {ReduceKind::Max, ReduceKind::Min}) {
    for (float v : run<float>(ncclFloat32, k, rep(nan), rep(1.0f))) EXPECT_TRUE(std::isnan(v));
    for (float v : run<float>(ncclFloat32, k, rep(1.0f), rep(nan))) EXPECT_TRUE(std::isnan(v));
    for (double v : run<double>(ncclFloat64, k, rep(1.0), rep(double(nan)))) EXPECT_TRUE(std::isnan(v));
    for (half_t v : run<half_t>(ncclFloat16, k, rep(half_t{0x7e00}), rep(half_t{0x3c00}))) EXPECT_EQ(v.bits & 0x7e00, 0x7e00);
    for (bf16_t v : run<bf16_t>(ncclBfloat16, k, rep(bf16_t{0x3f80}), rep(bf16_t{0x7fc0})))
      EXPECT_TRUE(std::isnan(bf16ToFloat(v)));
    for (fp8e4m3_t v : run<fp8e4m3_t>(ncclFloat8e4m3, k, rep(fp8e4m3_t{0x38}), rep(fp8e4m3_t{0x7f})))
      EXPECT_EQ(v.bits & 0x7f, 0x7f);
  }
}

TEST_P(HostReduceTest, NarrowFloatsRoundOncePerStep) {
  // 2048 + 1 is a tie in half: stays 2048 (even); 2048 + 3 -> 2052.
  for (half_t v : run<half_t>(ncclFloat16, ReduceKind::Sum, rep(floatToHalf(2048)), rep(floatToHalf(1))))
    EXPECT_EQ(halfToFloat(v), 2048.0f);
  for (half_t v : run<half_t>(ncclFloat16, ReduceKind::Sum, rep(floatToHalf(2048)), rep(floatToHalf(3))))
    EXPECT_EQ(halfToFloat(v), 2052.0f);
  // e4m3 saturates, e5m2 keeps infinity but saturates finite overflow.
  for (auto v : run<fp8e4m3_t>(ncclFloat8e4m3, ReduceKind::Sum, rep(fp8e4m3_t{0x7e}), rep(fp8e4m3_t{0x7e})))
    EXPECT_EQ(v.bits, 0x7e);
  for (auto v : run<fp8e5m2_t>(ncclFloat8e5m2, ReduceKind::Sum, rep(fp8e5m2_t{0x7b}), rep(fp8e5m2_t{0x7b})))
    EXPECT_EQ(v.bits, 0x7b);
  for (auto v : run<fp8e5m2_t>(ncclFloat8e5m2, ReduceKind::Sum, rep(fp8e5m2_t{0x7c}), rep(fp8e5m2_t{0x3c})))
    EXPECT_EQ(v.bits, 0x7c);
  // bf16 1 + 2^-8 is a tie: stays 1.
  for (auto v : run<bf16_t>(ncclBfloat16, ReduceKind::Sum, rep(bf16_t{0x3f80}), rep(bf16_t{0x3b80})))
    EXPECT_EQ(v.bits, 0x3f80);
}

TEST_P(HostReduceTest, PreMulSumReadsScalarAtCallTime) {
  float s = 2.0f;
  const std::vector<float> a = rep(3.0f), b = rep(5.0f);
  for (float v : run<float>(ncclFloat32, ReduceKind::PreMulSum, a, b, false, 1, &s, true)) EXPECT_EQ(v, 16.0f);
  s = -1.0f;
  for (float v : run<float>(ncclFloat32, ReduceKind::PreMulSum, a, b, false, 1, &s, true)) EXPECT_EQ(v, -8.0f);
  // Without pre flags it is a plain sum, and the scalar may be absent.
  for (float v : run<float>(ncclFloat32, ReduceKind::PreMulSum, a, b)) EXPECT_EQ(v, 8.0f);
}

TEST_P(HostReduceTest, FlagsIgnoredByOtherKinds) {
  float s = 100.0f;
  for (float v : run<float>(ncclFloat32, ReduceKind::Sum, rep(3.0f), rep(5.0f), true, 4, &s, true)) EXPECT_EQ(v, 8.0f);
  for (float v : run<float>(ncclFloat32, ReduceKind::SumPostDiv, rep(3.0f), rep(5.0f), true, 4, &s, true))
    EXPECT_EQ(v, 2.0f);
}

INSTANTIATE_TEST_SUITE_P(Simd, HostReduceTest, ::testing::Values(SimdLevel::Portable, SimdLevel::Avx2),
                         [](const auto& info) {
                           return std::string(info.param == SimdLevel::Avx2 ? "Avx2" : "Portable");
                         });

TEST(HostReduce, TypeSize) {
  EXPECT_EQ(typeSize(ncclInt8), 1u);
  EXPECT_EQ(typeSize(ncclUint8), 1u);
  EXPECT_EQ(typeSize(ncclInt32), 4u);
  EXPECT_EQ(typeSize(ncclUint32), 4u);
  EXPECT_EQ(typeSize(ncclInt64), 8u);
  EXPECT_EQ(typeSize(ncclUint64), 8u);
  EXPECT_EQ(typeSize(ncclFloat16), 2u);
  EXPECT_EQ(typeSize(ncclFloat32), 4u);
  EXPECT_EQ(typeSize(ncclFloat64), 8u);
  EXPECT_EQ(typeSize(ncclBfloat16), 2u);
  EXPECT_EQ(typeSize(ncclFloat8e4m3), 1u);
  EXPECT_EQ(typeSize(ncclFloat8e5m2), 1u);
  EXPECT_EQ(typeSize(ncclNumTypes), 0u);
  EXPECT_EQ(typeSize(ncclDataType_t(-1)), 0u);
}

TEST(HostReduce, SetSimdLevelIsCappedAtDetected) {
  const SimdLevel before = host::setSimdLevel(SimdLevel::Avx2);
  EXPECT_LE(host::activeSimdLevel(), host::detectedSimdLevel());
  host::setSimdLevel(before);
}

}  // namespace
}  // namespace chorus
