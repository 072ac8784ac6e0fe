// The correctness matrix with ranks as threads of this process: every
// collective at every rank count and every datatype, at counts 0, 1 and an
// odd 1001, in-place and out-of-place. Reductions get every operator at 1, 2,
// 3 and 8 ranks and a representative three (sum, avg, premulsum with a
// run-time scalar) at 4, 5 and 7, which keeps the suite's run time in budget.
// Each test creates one set of communicators and runs its whole slice of the
// matrix on them, so the cost is dominated by the collectives themselves.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

const int kRankCounts[] = {1, 2, 3, 4, 5, 7, 8};

bool fullOpCoverage(int nranks) { return nranks <= 3 || nranks == 8; }

using MatrixParam = std::tuple<Coll, int>;

class MatrixThreads : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(MatrixThreads, SmallCountsAllTypes) {
  const auto [coll, nranks] = GetParam();
  Selection sel;
  sel.types = allTypes();
  sel.ops = fullOpCoverage(nranks) ? allOps() : std::vector<OpKind>{OpKind::Sum, OpKind::Avg, OpKind::PreMulDevice};
  sel.counts = {0, 1, 1001};
  runThreads(nranks, [&](RankCtx& ctx) { runSelection(ctx, coll, sel); });
}

std::string paramName(const ::testing::TestParamInfo<MatrixParam>& info) {
  return std::string(collName(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(AllColls, MatrixThreads,
                         ::testing::Combine(::testing::ValuesIn(allColls()), ::testing::ValuesIn(kRankCounts)),
                         paramName);

}  // namespace
}  // namespace chorus::test
