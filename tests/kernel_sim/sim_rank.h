// One rank of a kernel_sim test: runs its plans with the CPU build of the
// kernels (sim_kernels.h) as GPU mode would run them, or with the host
// executor for comparison, on the rank's threads-as-ranks communicator.
#pragma once

#include <barrier>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/fifo_end_tally.h"
#include "common/rank_runner.h"
#include "gpu/lane_translate.h"
#include "kernels/lane_plan.h"
#include "plan/plan.h"

namespace chorus::test {

// What the kernels of one call left: the failure record the GPU executor
// reads (status 0: every launch succeeded) and the barrier faults cuda_sim.h
// found.
struct SimOutcome {
  step::LaneFailure record;
  std::vector<std::string> faults;
};

class SimRank {
 public:
  // `ready`: a barrier of all the test's ranks (see runKernels).
  SimRank(RankCtx& ctx, std::barrier<>& ready) : ctx_(ctx), ready_(ready) {}

  int threads = 32;                        // per block: few, so launches are cheap on two cores
  uint64_t timeoutNs = 30'000'000'000ull;  // LaneLaunch::timeoutNs (0: no limit, the product's default)
  // The flag the kernels poll (LaneLaunch::abortFlag): GPU mode's mapped
  // abort word; null: one that stays 0.
  const volatile int32_t* abortFlag = nullptr;
  // A late rank: it sleeps this long after the ranks met, before its kernels run.
  int lateMs = 0;

  // Builds `plan` (its tasks set) as GPU mode does, translates it, fills each
  // launch's header as the GPU executor does (gpu::launchHeader), packs it
  // and runs it with the CPU kernels. Every rank of the test must call it
  // for the same call: the ranks meet at `ready` before any kernel runs.
  // False, recorded on the rank, when a stage before the kernels failed.
  bool runKernels(Plan& plan, SimOutcome* out);

  // The same plan (built as GPU mode builds it) run by the host executor
  // (runHostPlans), as the reference the kernels must match bit for bit.
  // Only before this rank's first runKernels: the host connectors do not
  // follow counters that kernels moved. All ranks meet at `ready` after it.
  ncclResult_t runHostExecutor(Plan& plan);

 private:
  void zeroNewSlots(const std::vector<gpu::LaunchArrays>& launches);

  RankCtx& ctx_;
  std::barrier<>& ready_;
  FifoEndTally::Positions positions_;  // the kernels' connector-end counters, from call to call
  std::set<const void*> zeroed_;       // FIFOs whose slots were zeroed
};

}  // namespace chorus::test
