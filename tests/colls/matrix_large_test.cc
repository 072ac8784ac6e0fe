// Large counts (about 1.5 MiB in the biggest buffer, plus 3 elements so
// chunk and piece boundaries land at odd places) for every collective with
// float and bf16. This is where pipelining, several channels, slot
// wrap-around and vectorised reduce loops all come into play. A second test
// shifts every buffer off its natural alignment.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

constexpr size_t kLargeBytes = 1536 * 1024;
using LargeParam = std::tuple<Coll, int>;
class MatrixLarge : public ::testing::TestWithParam<LargeParam> {};
class MatrixMisaligned : public ::testing::TestWithParam<LargeParam> {};

TEST_P(MatrixLarge, FloatAndBf16) {
  const auto [coll, nranks] = GetParam();
  runThreads(nranks, [&](RankCtx& ctx) {
    int index = 0;
    for (ncclDataType_t t : {ncclFloat32, ncclBfloat16}) {
      const size_t count = countForBytes(coll, t, nranks, kLargeBytes) + 3;
      // float: plain sum and a run-time scalar; bf16: avg (sum then divide).
      std::vector<OpKind> ops = {OpKind::Sum};
      if (collReduces(coll))
        ops = t == ncclFloat32 ? std::vector<OpKind>{OpKind::Sum, OpKind::PreMulDevice} : std::vector<OpKind>{OpKind::Avg};
      for (OpKind op : ops)
        for (bool inPlace : {false, true}) {
          if (inPlace && !collSupportsInPlace(coll)) continue;
          Case c;
          c.coll = coll;
          c.type = t;
          c.op = op;
          c.count = count;
          c.inPlace = inPlace;
          c.root = (index++ * 3 + 1) % nranks;
          if (!runCase(ctx, c)) return;
        }
    }
  });
}

// Buffers one element (or 1..7 bytes for wider types) away from any vector
// alignment: the reduce loops must handle unaligned heads and tails.
TEST_P(MatrixMisaligned, OneElementOff) {
  const auto [coll, nranks] = GetParam();
  runThreads(nranks, [&](RankCtx& ctx) {
    int index = 0;
    for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclInt8, ncclFloat64}) {
      Case c;
      c.coll = coll;
      c.type = t;
      c.op = OpKind::Sum;
      c.count = countForBytes(coll, t, nranks, 256 * 1024) + 1;
      c.misalign = typeInfo(t).size;
      c.root = index++ % nranks;
      if (!runCase(ctx, c)) return;
    }
  });
}

std::string paramName(const ::testing::TestParamInfo<LargeParam>& info) {
  return std::string(collName(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(AllColls, MatrixLarge,
                         ::testing::Combine(::testing::ValuesIn(allColls()), ::testing::Values(1, 3, 8)), paramName);
INSTANTIATE_TEST_SUITE_P(AllColls, MatrixMisaligned,
                         ::testing::Combine(::testing::ValuesIn(allColls()), ::testing::Values(2, 5)), paramName);

}  // namespace
}  // namespace chorus::test
