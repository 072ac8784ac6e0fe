// PreMulSum operators (src/core/redop_table.h): PyTorch creates one per
// call and destroys it after. Handles are given out again, a host-immediate
// value resolves to the same kept copy every time (so the plan cache finds
// the plan of the previous call), and a spec resolved before a destroy keeps
// its value when the handle is reused for another one.
#include <gtest/gtest.h>

#include "core/redop_table.h"

namespace chorus {
namespace {

ReduceSpec resolved(const RedOpTable& table, ncclRedOp_t op, ncclDataType_t type = ncclFloat32) {
  ReduceSpec spec{};
  EXPECT_EQ(table.resolve(op, type, 4, &spec), ncclSuccess);
  return spec;
}

TEST(RedOpTable, TheSameHostValueResolvesToTheSameSpecAndHandlesAreReused) {
  RedOpTable table;
  const float half = 0.5f;
  ncclRedOp_t a{}, b{};
  ASSERT_EQ(table.create(ncclFloat32, &half, ncclScalarHostImmediate, &a), ncclSuccess);
  EXPECT_EQ(static_cast<int>(a), static_cast<int>(ncclNumOps));
  const ReduceSpec first = resolved(table, a);
  EXPECT_EQ(first.kind, ReduceKind::PreMulSum);
  EXPECT_TRUE(first.scalarOnHost);
  EXPECT_EQ(*static_cast<const float*>(first.scalar), 0.5f);
  ASSERT_EQ(table.destroy(a), ncclSuccess);

  const float alsoHalf = 0.5f;  // another variable, the same value
  ASSERT_EQ(table.create(ncclFloat32, &alsoHalf, ncclScalarHostImmediate, &b), ncclSuccess);
  EXPECT_EQ(b, a) << "the destroyed handle is given out again";
  EXPECT_EQ(resolved(table, b).scalar, first.scalar) << "same value, same kept copy";
  ASSERT_EQ(table.destroy(b), ncclSuccess);

  const float quarter = 0.25f;
  ncclRedOp_t c{};
  ASSERT_EQ(table.create(ncclFloat32, &quarter, ncclScalarHostImmediate, &c), ncclSuccess);
  EXPECT_EQ(c, a);
  EXPECT_NE(resolved(table, c).scalar, first.scalar);
  EXPECT_EQ(*static_cast<const float*>(first.scalar), 0.5f) << "a spec resolved earlier keeps its value";
  EXPECT_EQ(*static_cast<const float*>(resolved(table, c).scalar), 0.25f);
}

TEST(RedOpTable, ValuesAreKeptPerDatatypeAndDeviceScalarsArePointers) {
  RedOpTable table;
  const double one = 1.0;
  const float oneF = 1.0f;
  ncclRedOp_t d{}, f{}, dev{};
  ASSERT_EQ(table.create(ncclFloat64, &one, ncclScalarHostImmediate, &d), ncclSuccess);
  ASSERT_EQ(table.create(ncclFloat32, &oneF, ncclScalarHostImmediate, &f), ncclSuccess);
  EXPECT_NE(d, f);
  EXPECT_EQ(*static_cast<const double*>(resolved(table, d, ncclFloat64).scalar), 1.0);
  EXPECT_EQ(*static_cast<const float*>(resolved(table, f).scalar), 1.0f);
  ASSERT_EQ(table.create(ncclFloat32, &oneF, ncclScalarDevice, &dev), ncclSuccess);
  const ReduceSpec s = resolved(table, dev);
  EXPECT_EQ(s.scalar, &oneF);
  EXPECT_FALSE(s.scalarOnHost);
  ReduceSpec wrong{};
  EXPECT_EQ(table.resolve(f, ncclFloat64, 4, &wrong), ncclInvalidArgument) << "made for another datatype";
  ASSERT_EQ(table.destroy(f), ncclSuccess);
  EXPECT_EQ(table.destroy(f), ncclInvalidArgument) << "destroyed twice";
  EXPECT_EQ(table.resolve(f, ncclFloat32, 4, &wrong), ncclInvalidArgument) << "used after destroy";
}

}  // namespace
}  // namespace chorus
