// The direct reductions' plans translated for the GPU (src/gpu/lane_translate.cc,
// docs/wire.md): on one host and across 4 "hosts" of 2 ranks (the two-level
// form, the chains), compressed and deterministic AllReduce, ReduceScatter and
// Reduce, every rank's plan becomes wire launches of one task each, with the
// task's format and residual, that keep every step, whose rank tables name
// only the launch's fifos, and that the kernel's checks accept; across all
// ranks every FIFO appears once as a send end and once as a receive end (so
// the tables' connectors were all registered). Runs without a GPU.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/fifo_end_tally.h"
#include "common/rank_runner.h"
#include "common/translate_rank_plan.h"
#include "core/comm.h"
#include "gpu/lane_translate.h"
#include "plan/plan_builder.h"
#include "transport/connection_table.h"
#include "wire/wire_plans.h"

namespace chorus::test {
namespace {

// Large enough that every shard fills its slots (16 elements per owner and
// more per slot than any piece size): pieces are as large as plans make them.
constexpr size_t kCount = size_t(1) << 20;

Task wireTask(const WireCall& c, int nranks, float* residual) {
  Task t = floatSumTask(kCount);
  t.type = c.type;
  t.dtype = c.dtype;
  t.spec.type = c.dtype;
  if (c.type == CollType::ReduceScatter) t.count /= size_t(nranks);
  t.root = c.root;
  t.wire.format = c.format;
  t.wire.deterministic = c.format == 0 ? 1 : 0;
  t.wire.residual = c.format != 0 ? residual : nullptr;
  return t;
}

// The fifo indices a wire segment's table names (its connector entries).
void checkTable(RankCtx& ctx, const gpu::LaunchArrays& la, const sched::Segment& s) {
  if (s.ringTable < 0) return;
  const int n = s.nranks;
  const size_t entries = size_t(s.kind == sched::SegmentKind::WireRelay ? 2 * n : 3 * n);
  if (size_t(s.ringTable) + entries > la.rankTable.size()) {
    ctx.fail("rank %d: a wire table at %d of %d ranks past the launch's %zu entries", ctx.rank, s.ringTable, n,
             la.rankTable.size());
    return;
  }
  for (int e = 0; e < 2 * n; ++e) {
    const int32_t v = la.rankTable[size_t(s.ringTable + e)];
    if (v != sched::kNoConn && (v < 0 || size_t(v) >= la.fifos.size()))
      ctx.fail("rank %d: table entry %d names fifo %d of %zu", ctx.rank, e, v, la.fifos.size());
  }
}

void checkLaunches(RankCtx& ctx, const Plan& plan, const std::vector<gpu::LaunchArrays>& launches, uint8_t format,
                   const float* residual) {
  uint64_t planSteps = 0, launchSteps = 0;
  for (const Lane& l : plan.lanes)
    for (const sched::Segment& s : l.segments) planSteps += sched::segmentSteps(s);
  for (const auto& la : launches) {
    if (!la.header.wire || la.tasks.size() != 1 || la.header.wireFormat != format || la.header.residual != residual)
      ctx.fail("rank %d: a launch of %zu tasks, wire %d, format %d (want a wire launch of one task, format %d)",
               ctx.rank, la.tasks.size(), int(la.header.wire), int(la.header.wireFormat), int(format));
    for (const sched::Segment& s : la.segments) {
      if (!sched::isWireKind(s.kind)) ctx.fail("rank %d: a plain segment in a wire launch", ctx.rank);
      checkTable(ctx, la, s);
      launchSteps += sched::segmentSteps(s);
    }
    if (!kernelAccepts(la)) ctx.fail("rank %d: packLaneParams refuses the launch", ctx.rank);
  }
  if (planSteps != launchSteps)
    ctx.fail("rank %d: %llu plan steps, %llu launch steps", ctx.rank, (unsigned long long)planSteps,
             (unsigned long long)launchSteps);
}

class WireTranslate : public ::testing::TestWithParam<std::tuple<WireLayout, int>> {};

TEST_P(WireTranslate, EveryRankTranslatesAndFifosPairUp) {
  const auto [layout, callIndex] = GetParam();
  const auto [nranks, hosts] = layout;
  const WireCall& call = kWireCalls[callIndex];
  auto graph = hostsGraph(nranks, hosts, false);
  ASSERT_TRUE(graph);
  FifoEndTally tally;
  RunOptions opts;
  opts.timeoutMs = 240000;
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        ctx.comm->graph = graph;
        std::vector<float> residual(kCount, 0.0f);
        Plan plan;
        plan.comm = ctx.comm;
        Task t = wireTask(call, nranks, residual.data());
        t.comm = ctx.comm;
        plan.tasks.push_back(t);
        FifoEndTally::Positions positions;
        std::vector<gpu::LaunchArrays> launches;
        if (!translateRankPlan(ctx, plan, &positions, &launches)) return;
        checkLaunches(ctx, plan, launches, call.format, t.wire.residual);
        tally.add(positions);
      },
      opts);
  tally.expectEachFifoPairedOnce();
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndCalls, WireTranslate,
                         ::testing::Combine(kWireLayouts, ::testing::Range(0, int(std::size(kWireCalls)))),
                         [](const auto& info) { return wireCaseName(info.param); });

}  // namespace
}  // namespace chorus::test
