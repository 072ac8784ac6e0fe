// Host plan -> lane-kernel launch arrays (src/gpu/lane_translate.cc) on the
// plans the plan builder makes for GPU mode, as every rank of a
// threads-as-ranks communicator translates its own: see the comment below.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/fifo_end_tally.h"
#include "common/rank_runner.h"
#include "common/task_builder.h"
#include "common/translate_rank_plan.h"
#include "core/comm.h"
#include "gpu/lane_translate.h"
#include "plan/plan_builder.h"

namespace chorus {
namespace {

using namespace chorus::test;
using sched::kNoConn;

// Real plans from the plan builder (every algorithm and protocol, several
// collectives) must fit the lane kernel: each is one launch that keeps every
// step, stays within the launch's limits and only names its own fifos and
// rank table; across all ranks each FIFO appears exactly once as a send end
// and once as a receive end. Plans are sized as GPU mode sizes them, so
// every ring and direct step fits half a FIFO in the kernel's pieces (LL:
// 4 KiB of an 8 KiB slot); the translation refuses a step that does not.
using RealCase = std::tuple<const char*, const char*, CollType>;
class LaneTranslateRealPlans : public ::testing::TestWithParam<RealCase> {};

void checkLaunch(RankCtx& ctx, const gpu::LaunchArrays& L) {
  if (!kernelAccepts(L)) ctx.fail("rank %d: packLaneParams refuses the launch", ctx.rank);
  if (L.lanes.size() > gpu::kMaxLanesPerLaunch) ctx.fail("rank %d: %zu lanes", ctx.rank, L.lanes.size());
  if (L.segments.size() > static_cast<size_t>(dev::kLaunchMaxSegments))
    ctx.fail("rank %d: %zu segments", ctx.rank, L.segments.size());
  for (const auto& dl : L.lanes)
    if (dl.protocol == dev::Protocol::LL && dl.pieceBytes > dev::kLLMaxPieceBytes)
      ctx.fail("rank %d: LL piece of %u bytes", ctx.rank, dl.pieceBytes);
  for (const auto& s : L.segments) {
    for (int16_t c : s.conn)
      if (c != kNoConn && (c < 0 || static_cast<size_t>(c) >= L.fifos.size()))
        ctx.fail("rank %d: connector %d of %zu fifos", ctx.rank, c, L.fifos.size());
    if (s.ringTable >= 0 && static_cast<size_t>(s.ringTable) + static_cast<size_t>(s.nranks) > L.rankTable.size())
      ctx.fail("rank %d: ring table %d+%d of %zu", ctx.rank, s.ringTable, s.nranks, L.rankTable.size());
  }
}

TEST_P(LaneTranslateRealPlans, EveryRankTranslatesAndFifosPairUp) {
  const auto [algo, proto, coll] = GetParam();
  const int nranks = std::string(algo) == "Direct" ? 4 : 5;  // recursive doubling: a power of two
  FifoEndTally tally;
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", algo}, {"NCCL_PROTO", proto}};
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        const size_t count = 300001;  // several rounds and pieces, ragged
        std::vector<float> in(count * nranks, 1.0f), out(count * nranks, 0.0f);
        Plan plan;
        plan.comm = ctx.comm;
        plan.tasks.push_back(makeTask(ctx.comm, coll, ncclFloat32, sumOf(ncclFloat32), in.data(), out.data(), count));
        FifoEndTally::Positions positions;
        std::vector<gpu::LaunchArrays> launches;
        if (!translateRankPlan(ctx, plan, &positions, &launches)) return;
        const uint64_t stepsOfPlan = planSteps(plan), stepsOfLaunches = launchSteps(launches);
        for (const auto& L : launches) checkLaunch(ctx, L);
        if (launches.size() != 1) ctx.fail("rank %d: %zu launches for one task", ctx.rank, launches.size());
        if (stepsOfPlan != stepsOfLaunches)
          ctx.fail("rank %d: %llu plan steps, %llu launch steps", ctx.rank,
                   static_cast<unsigned long long>(stepsOfPlan), static_cast<unsigned long long>(stepsOfLaunches));
        tally.add(positions);
      },
      opts);
  tally.expectEachFifoPairedOnce();
}

INSTANTIATE_TEST_SUITE_P(AlgosProtosColls, LaneTranslateRealPlans,
                         ::testing::Combine(::testing::Values("Ring", "Tree"), ::testing::Values("Simple", "LL"),
                                            ::testing::Values(CollType::AllReduce, CollType::AllGather,
                                                              CollType::ReduceScatter, CollType::Broadcast)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_" +
                                  std::to_string(int(std::get<2>(info.param)));
                         });
INSTANTIATE_TEST_SUITE_P(DirectProtos, LaneTranslateRealPlans,
                         ::testing::Combine(::testing::Values("Direct"), ::testing::Values("Simple", "LL"),
                                            ::testing::Values(CollType::AllReduce)),
                         [](const auto& info) { return std::string("Direct_") + std::get<1>(info.param); });

}  // namespace
}  // namespace chorus
