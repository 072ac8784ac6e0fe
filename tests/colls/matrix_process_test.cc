// The matrix again with every rank in its own forked process: the bootstrap
// goes over TCP to the store served by this (parent) process and data moves
// through the shared-memory transport. A smaller slice than the threaded
// matrix: every collective at 2, 3 and 4 ranks, a few datatypes, small and
// medium counts.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

const int kRankCounts[] = {2, 3, 4};

using ProcParam = std::tuple<Coll, int>;
class MatrixProcesses : public ::testing::TestWithParam<ProcParam> {};

TEST_P(MatrixProcesses, FewTypes) {
  const auto [coll, nranks] = GetParam();
  Selection sel;
  sel.types = {ncclFloat32, ncclInt8, ncclBfloat16};
  sel.ops = {OpKind::Sum, OpKind::Max, OpKind::PreMulDevice};
  sel.counts = {0, 1, 1001, countForBytes(coll, ncclFloat32, nranks, 512 * 1024) + 1};
  RunOptions opts;
  opts.timeoutMs = 60000;
  runProcesses(nranks, [&](RankCtx& ctx) { runSelection(ctx, coll, sel); }, opts);
}

std::string paramName(const ::testing::TestParamInfo<ProcParam>& info) {
  return std::string(collName(std::get<0>(info.param))) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(AllColls, MatrixProcesses,
                         ::testing::Combine(::testing::ValuesIn(allColls()), ::testing::ValuesIn(kRankCounts)),
                         paramName);

}  // namespace
}  // namespace chorus::test
