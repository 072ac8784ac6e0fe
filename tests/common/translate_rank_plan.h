// What the GPU translation tests do on each rank: build the plan of its
// tasks as GPU mode builds it (pieces as the kernel moves them:
// PlanBuilder::pieceBytes) on the rank's host-mode communicator, connect it,
// and translate it into GPU launches, handing out one position counter per
// (FIFO control block, sender side) into `positions` (the FifoEndTally's
// input).
#pragma once

#include <cstdint>
#include <vector>

#include "common/fifo_end_tally.h"
#include "common/rank_runner.h"
#include "core/comm.h"
#include "gpu/lane_translate.h"
#include "plan/plan_builder.h"
#include "transport/connection_table.h"
#if CHORUS_HAVE_CUDA
#include "kernels/launch.h"
#endif

namespace chorus::test {

// What the kernel's own checks (packLaneParams) say of a translated launch.
// They live in the kernels' library: a build without CUDA accepts.
inline bool kernelAccepts(const gpu::LaunchArrays& la) {
#if CHORUS_HAVE_CUDA
  dev::LaneLaunch L = la.header;
  L.lanes = la.lanes.data();
  L.segments = la.segments.data();
  L.fifos = la.fifos.data();
  L.rankTable = la.rankTable.data();
  L.nTasks = 0;
  static thread_local dev::LaneParams params;
  return dev::packLaneParams(L, sizeof(float), &params) == cudaSuccess;
#else
  (void)la;
  return true;
#endif
}

// False, with the failure recorded on ctx, when a stage fails.
inline bool translateRankPlan(RankCtx& ctx, Plan& plan, FifoEndTally::Positions* positions,
                              std::vector<gpu::LaunchArrays>* launches, size_t maxLanes = gpu::kMaxLanesPerLaunch) {
  PlanContext gpuPlan = planContextOf(ctx.comm);
  gpuPlan.hostMode = false;
  if (!RANK_OK(ctx, PlanBuilder(gpuPlan, &plan).build())) return false;
  if (!RANK_OK(ctx, ctx.comm->conns->connectAll(waitBoundAfter(10000)))) return false;
  const gpu::PositionFor positionFor = [positions](const FifoEnd& e, bool sender) {
    return &(*positions)[{e.ctl, sender}];
  };
  return RANK_OK(ctx, gpu::translatePlan(plan, positionFor, launches, maxLanes));
}

// The steps of every segment of the plan, and of the launches made from it
// (translation keeps every step).
inline uint64_t planSteps(const Plan& plan) {
  uint64_t steps = 0;
  for (const Lane& l : plan.lanes)
    for (const sched::Segment& s : l.segments) steps += sched::segmentSteps(s);
  return steps;
}
inline uint64_t launchSteps(const std::vector<gpu::LaunchArrays>& launches) {
  uint64_t steps = 0;
  for (const gpu::LaunchArrays& L : launches)
    for (const sched::Segment& s : L.segments) steps += sched::segmentSteps(s);
  return steps;
}

}  // namespace chorus::test
