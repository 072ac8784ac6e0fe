// Self-checks of the test harness's value generator (tests/common): if the
// inputs were not exact in some type, the matrix would be checking rounding
// luck instead of the library. For every type, operator and rank count, every
// input and every partial result over any subset of ranks (any order a
// reduction could take) must be exactly representable.
#include <gtest/gtest.h>

#include <cmath>

#include "common/expected_values.h"

namespace chorus::test {
namespace {

TEST(ExpectedValues, KnownEncodings) {
  EXPECT_EQ(encodeValue(ncclFloat16, 1.0), 0x3c00u);
  EXPECT_EQ(encodeValue(ncclFloat16, -2.0), 0xc000u);
  EXPECT_EQ(encodeValue(ncclFloat16, std::ldexp(1.0, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(encodeValue(ncclFloat16, 2049.0), 0x6800u);                // tie -> even (2048)
  EXPECT_EQ(encodeValue(ncclFloat16, 2051.0), 0x6802u);                // tie -> even (2052)
  EXPECT_EQ(encodeValue(ncclBfloat16, 1.0), 0x3f80u);
  EXPECT_EQ(encodeValue(ncclFloat8e4m3, 1.0), 0x38u);
  EXPECT_EQ(encodeValue(ncclFloat8e4m3, 16.0), 0x58u);
  EXPECT_EQ(encodeValue(ncclFloat8e4m3, 17.0), 0x58u);  // tie -> even (16)
  EXPECT_EQ(encodeValue(ncclFloat8e5m2, 1.0), 0x3cu);
  EXPECT_EQ(encodeValue(ncclFloat8e5m2, 8.0), 0x48u);
  EXPECT_EQ(encodeValue(ncclFloat8e5m2, -0.75), 0xbau);
  EXPECT_EQ(encodeValue(ncclInt8, -1.0), 0xffu);
  EXPECT_EQ(decodeValue(ncclInt8, 0x80), -128.0);
  EXPECT_EQ(decodeValue(ncclInt32, 0xfffffffe), -2.0);
  EXPECT_EQ(decodeValue(ncclUint32, 0xfffffffe), 4294967294.0);
  for (ncclDataType_t t : allTypes())
    for (double v : {0.0, 1.0, -1.0, 3.0, 7.0, 8.0})
      if (typeInfo(t).isSigned || v >= 0) {
        EXPECT_TRUE(representable(t, v)) << typeInfo(t).name << " " << v;
      }
}

double scaled(ncclDataType_t t, OpKind op, int nranks, int r, size_t i) {
  const double x = reduceInput(t, op, nranks, r, i);
  return (op == OpKind::PreMulImmediate || op == OpKind::PreMulDevice) ? x * preMulScalar(t, r) : x;
}

TEST(ExpectedValues, EveryPartialResultIsExact) {
  for (ncclDataType_t t : allTypes())
    for (OpKind op : allOps())
      for (int n = 1; n <= 8; ++n)
        for (size_t i = 0; i < 300; ++i) {
          for (int r = 0; r < n; ++r)
            ASSERT_TRUE(representable(t, reduceInput(t, op, n, r, i))) << typeInfo(t).name << " " << opName(op);
          for (unsigned mask = 1; mask < (1u << n); ++mask) {
            double acc = op == OpKind::Prod ? 1 : 0;
            for (int r = 0; r < n; ++r) {
              if (!(mask & (1u << r))) continue;
              const double x = scaled(t, op, n, r, i);
              if (op == OpKind::Prod) acc *= x;
              else if (op == OpKind::Max) acc = std::max(acc, x);
              else if (op == OpKind::Min) acc = std::min(acc, x);
              else acc += x;
            }
            ASSERT_TRUE(representable(t, acc)) << typeInfo(t).name << " " << opName(op) << " n=" << n << " index "
                                               << i << " subset " << mask << " partial " << acc;
          }
        }
}

TEST(ExpectedValues, TablesMatchDirectComputation) {
  for (ncclDataType_t t : {ncclFloat32, ncclFloat8e5m2, ncclInt8})
    for (OpKind op : allOps()) {
      ReduceTables tab(t, op, 5, 2 * kInputPeriod);
      for (size_t i : {size_t{0}, size_t{1}, kInputPeriod - 1, kInputPeriod, 3 * kInputPeriod + 17}) {
        EXPECT_EQ(tab.expected(i), reduceExpectedBits(t, op, 5, i));
        EXPECT_EQ(tab.input(3, i), encodeValue(t, reduceInput(t, op, 5, 3, i)));
      }
    }
}

TEST(ExpectedValues, PayloadsAreFiniteAndVaried) {
  for (ncclDataType_t t : allTypes()) {
    const TypeInfo& ti = typeInfo(t);
    int same = 0;
    for (size_t i = 0; i < 1000; ++i) {
      const uint64_t b = payloadBits(t, 1, i);
      if (ti.isFloat) {
        EXPECT_TRUE(std::isfinite(decodeValue(t, b))) << ti.name;
      }
      same += b == payloadBits(t, 2, i);
    }
    EXPECT_LT(same, 1000 / 4 + 20) << ti.name << ": ranks' payloads must differ";
  }
}

}  // namespace
}  // namespace chorus::test
