// Forced algorithm / protocol / channel count. NCCL_ALGO, NCCL_PROTO and
// NCCL_MAX_NCHANNELS are read when a communicator is created; each test sets
// them around its run and checks the communicator's config captured them.
// Tree and Direct exist only for AllReduce; with Ring the other ring
// collectives run under the forced protocol too.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/coll_cases.h"
#include "common/rank_runner.h"
#include "core/comm.h"

namespace chorus::test {
namespace {

using VariantParam = std::tuple<const char*, const char*, int, int>;  // algo, proto, channels, nranks

class AlgoProto : public ::testing::TestWithParam<VariantParam> {};

TEST_P(AlgoProto, AllReduceAndRingCollectives) {
  const auto [algo, proto, channels, nranks] = GetParam();
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", algo},
              {"NCCL_PROTO", proto},
              {"NCCL_MAX_NCHANNELS", std::to_string(channels)},
              {"NCCL_MIN_NCHANNELS", std::to_string(channels)}};
  const bool ring = std::string(algo) == "Ring";
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        // Internal view: the knobs must have been captured by init.
        if (ctx.comm->config.algo != algo || ctx.comm->config.proto != proto ||
            ctx.comm->config.maxChannels != channels)
          ctx.fail("rank %d: config snapshot algo=%s proto=%s maxChannels=%d, expected %s/%s/%d", ctx.rank,
                   ctx.comm->config.algo.c_str(), ctx.comm->config.proto.c_str(), ctx.comm->config.maxChannels, algo,
                   proto, channels);
        Selection sel;
        sel.types = {ncclFloat32, ncclInt32, ncclFloat16, ncclFloat8e4m3};
        sel.ops = {OpKind::Sum, OpKind::Max, OpKind::Avg, OpKind::PreMulDevice};
        sel.counts = {1, 1001};
        runSelection(ctx, Coll::AllReduce, sel);
        Selection big;  // several slots per channel: pipelining under the forced protocol
        big.types = {ncclFloat32};
        big.ops = {OpKind::Sum};
        big.counts = {200003};
        runSelection(ctx, Coll::AllReduce, big);
        if (!ring) return;
        Selection few;
        few.types = {ncclFloat32, ncclBfloat16};
        few.ops = {OpKind::Min};
        few.counts = {1, 1001};
        big.counts = {100003};
        for (Coll c : {Coll::ReduceScatter, Coll::AllGather, Coll::Broadcast, Coll::Reduce}) {
          runSelection(ctx, c, few);
          runSelection(ctx, c, big);
        }
      },
      opts);
}

std::string paramName(const ::testing::TestParamInfo<VariantParam>& info) {
  return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_" +
         std::to_string(std::get<2>(info.param)) + "ch_" + std::to_string(std::get<3>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Forced, AlgoProto,
                         ::testing::Combine(::testing::Values("Ring", "Tree"), ::testing::Values("LL", "Simple"),
                                            ::testing::Values(1, 4), ::testing::Values(3, 8)),
                         paramName);

// Direct: the two-rank exchange, recursive doubling over 4 and 8 ranks, and
// at 3 ranks (no power of two) the fallback to the ring.
INSTANTIATE_TEST_SUITE_P(ForcedDirect, AlgoProto,
                         ::testing::Combine(::testing::Values("Direct"), ::testing::Values("LL", "Simple"),
                                            ::testing::Values(1), ::testing::Values(2, 3, 4, 8)),
                         paramName);

}  // namespace
}  // namespace chorus::test
