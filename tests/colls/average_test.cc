// ncclAvg of floating-point values, computed as NCCL computes it: each
// rank's value times 1/nranks rounded to the type, then summed. Where every
// rank holds the type's largest finite value, the sum would overflow (fp16
// 65504 x 4 is infinite) but the average is that value again, within the
// rounding of the scaled terms; integers keep the sum divided once
// (truncated). Deterministic mode keeps its own rule (docs/wire.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/expected_values.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

struct LargestValue {
  ncclDataType_t type;
  double value;     // the type's largest finite value
  double relError;  // how far n scaled terms, each rounded once, may take the average
};

const LargestValue kLargest[] = {{ncclFloat16, 65504.0, 4e-3},
                                 {ncclBfloat16, 3.3895313892515355e38, 3e-2},
                                 {ncclFloat32, 3.4028234663852886e38, 1e-6},
                                 {ncclFloat64, 1.7976931348623157e308, 1e-15},
                                 {ncclFloat8e4m3, 448.0, 0.15},
                                 {ncclFloat8e5m2, 57344.0, 0.3}};

void averageOfLargest(RankCtx& ctx) {
  const size_t count = 1000;
  for (const LargestValue& l : kLargest) {
    const size_t esize = typeInfo(l.type).size;
    std::vector<uint8_t> in(count * esize), out(count * esize, 0);
    const uint64_t bits = encodeValue(l.type, l.value);
    for (size_t i = 0; i < count; ++i) storeElem(in.data(), i, esize, bits);
    if (!RANK_OK(ctx, ncclAllReduce(in.data(), out.data(), count, l.type, ncclAvg, ctx.comm, nullptr))) return;
    for (size_t i = 0; i < count; ++i) {
      const double got = decodeValue(l.type, loadElem(out.data(), i, esize));
      if (!std::isfinite(got) || std::fabs(got - l.value) > l.relError * l.value) {
        ctx.fail("rank %d: average of %d x %s's largest value %g is %g at element %zu", ctx.rank, ctx.nranks,
                 typeInfo(l.type).name, l.value, got, i);
        break;
      }
    }
  }
}

TEST(Average, OfTheLargestValueIsFiniteOnThreeRanks) { runThreads(3, averageOfLargest); }
TEST(Average, OfTheLargestValueIsFiniteOnFourRanks) { runThreads(4, averageOfLargest); }
TEST(Average, OfTheLargestValueIsFiniteOnTwoProcesses) { runProcesses(2, averageOfLargest); }

// Integers: the exact sum divided once, truncated toward zero, as in NCCL.
TEST(Average, IntegersDivideTheSumOnce) {
  runThreads(3, [](RankCtx& ctx) {
    std::vector<int32_t> in(8, ctx.rank == 0 ? 5 : 0), out(8, -1);
    if (!RANK_OK(ctx, ncclAllReduce(in.data(), out.data(), 8, ncclInt32, ncclAvg, ctx.comm, nullptr))) return;
    for (int32_t v : out)
      if (v != 1) ctx.fail("rank %d: 5 / 3 gave %d", ctx.rank, v);
  });
}

}  // namespace
}  // namespace chorus::test
