// Deterministic mode (docs/wire.md): every datatype and operator, ranks 1-8,
// in and out of place, threads and processes, the Ex calls and the plain
// calls under CHORUS_DETERMINISTIC=1, each result bit-exact against the
// rank-order sum computed in the test (wire_expected_util.cc). The same
// cases again with every algorithm forced by NCCL_ALGO, the LL protocol, and
// 1 and 4 channels: exact every time, hence bit-identical to one another.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "common/rank_runner.h"
#include "wire/wire_cases.h"

namespace chorus::test {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

const Env kDeterministicEnv = {{"CHORUS_DETERMINISTIC", "1"}};

RunOptions withEnv(Env extra) {
  RunOptions o;
  o.env = kDeterministicEnv;
  for (auto& kv : extra) o.env.push_back(std::move(kv));
  o.timeoutMs = 240000;
  return o;
}

// Every type and operator of one call at the given counts.
void fullMatrix(RankCtx& ctx, DetCall call, const std::vector<size_t>& counts) {
  for (ncclDataType_t t : detTypes())
    for (DetOp op : kDetOps)
      for (size_t count : counts)
        for (bool inPlace : {false, true})
          if (!runDetCase(ctx, ctx.comm, DetCase{call, t, op, count, inPlace})) return;
}

class DeterministicRanks : public ::testing::TestWithParam<int> {};

TEST_P(DeterministicRanks, AllReduceEveryTypeAndOp) {
  runThreads(
      GetParam(),
      [](RankCtx& ctx) {
        fullMatrix(ctx, DetCall::AllReduceEx, {1, 1001});
      },
      withEnv({}));
}

TEST_P(DeterministicRanks, PlainCallsUnderTheKnob) {
  runThreads(
      GetParam(),
      [](RankCtx& ctx) {
        for (DetCall call : {DetCall::AllReduce, DetCall::ReduceScatter, DetCall::Reduce})
          for (ncclDataType_t t : {ncclFloat16, ncclBfloat16, ncclFloat32, ncclInt32, ncclFloat8e4m3})
            for (DetOp op : {DetOp::Sum, DetOp::Avg, DetOp::PreMul, DetOp::Max})
              for (bool inPlace : {false, true})
                if (!runDetCase(ctx, ctx.comm, DetCase{call, t, op, 333, inPlace})) return;
      },
      withEnv({}));
}

TEST_P(DeterministicRanks, ReduceScatterEx) {
  runThreads(
      GetParam(),
      [](RankCtx& ctx) {
        fullMatrix(ctx, DetCall::ReduceScatterEx, {1, 517});
      },
      withEnv({}));
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeterministicRanks, ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

// Many pieces and an uneven last block, for the types whose pieces differ.
TEST(Deterministic, LargeCountsSpanManyPieces) {
  runThreads(
      3,
      [](RankCtx& ctx) {
        for (ncclDataType_t t : {ncclFloat16, ncclFloat32, ncclFloat64, ncclInt8})
          for (DetOp op : {DetOp::Sum, DetOp::PreMul})
            if (!runDetCase(ctx, ctx.comm, DetCase{DetCall::AllReduceEx, t, op, 300001, false})) return;
      },
      withEnv({}));
}

// Whatever the tuner is told, the result is the same exact value.
class DeterministicKnobs : public ::testing::TestWithParam<Env> {};

TEST_P(DeterministicKnobs, BitIdenticalUnderEveryAlgorithmAndChannelCount) {
  for (int n : {2, 4}) {
    runThreads(
        n,
        [](RankCtx& ctx) {
          for (DetCall call : {DetCall::AllReduce, DetCall::AllReduceEx, DetCall::ReduceScatter})
            for (ncclDataType_t t : {ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64})
              for (DetOp op : {DetOp::Sum, DetOp::Avg, DetOp::PreMul})
                if (!runDetCase(ctx, ctx.comm, DetCase{call, t, op, 20011, false})) return;
        },
        withEnv(GetParam()));
  }
}

std::string envName(const ::testing::TestParamInfo<Env>& i) {
  std::string s;
  for (const auto& [k, v] : i.param) s += (s.empty() ? "" : "_") + k + "_" + v;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s.empty() ? "default" : s;
}

INSTANTIATE_TEST_SUITE_P(Forced, DeterministicKnobs,
                         ::testing::Values(Env{}, Env{{"NCCL_ALGO", "Ring"}}, Env{{"NCCL_ALGO", "Tree"}},
                                           Env{{"NCCL_ALGO", "Direct"}}, Env{{"NCCL_ALGO", "Hier"}},
                                           Env{{"NCCL_PROTO", "LL"}}, Env{{"NCCL_MAX_NCHANNELS", "1"}},
                                           Env{{"NCCL_MIN_NCHANNELS", "4"}, {"NCCL_MAX_NCHANNELS", "4"}}),
                         envName);

TEST(Deterministic, Processes) {
  for (int n : {2, 3}) {
    runProcesses(
        n,
        [](RankCtx& ctx) {
          for (DetCall call : {DetCall::AllReduceEx, DetCall::AllReduce, DetCall::ReduceScatterEx, DetCall::Reduce})
            for (ncclDataType_t t : detTypes())
              for (DetOp op : {DetOp::Sum, DetOp::Avg, DetOp::PreMul, DetOp::Prod})
                for (bool inPlace : {false, true})
                  if (!runDetCase(ctx, ctx.comm, DetCase{call, t, op, 1001, inPlace})) return;
        },
        withEnv({}));
  }
}

// The point of the mode: a plain half sum rounds at every hop, the
// deterministic one once. Some element of a 8-rank ring sum must differ
// from the exact rank-order value (else the test above proves nothing).
TEST(Deterministic, NativeRingRoundsPerHop) {
  RunOptions o;
  o.env = {{"NCCL_ALGO", "Ring"}};
  runThreads(
      8,
      [](RankCtx& ctx) {
        const size_t count = 4096;
        std::vector<uint16_t> in(count), out(count);
        for (size_t i = 0; i < count; ++i)
          in[i] = static_cast<uint16_t>(detInput(ncclFloat16, DetOp::Sum, ctx.rank, i));
        if (!RANK_OK(ctx, ncclAllReduce(in.data(), out.data(), count, ncclFloat16, ncclSum, ctx.comm, nullptr))) return;
        size_t differ = 0;
        for (size_t i = 0; i < count; ++i) differ += out[i] != detExpected(ncclFloat16, DetOp::Sum, 8, i);
        if (differ == 0) ctx.fail("rank %d: the native ring sum equals the once-rounded sum everywhere", ctx.rank);
      },
      o);
}

}  // namespace
}  // namespace chorus::test
