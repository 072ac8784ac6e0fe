#include "kernel_sim/sim_rank.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/translate_rank_plan.h"
#include "core/coll_types.h"
#include "core/comm.h"
#include "gpu/lane_translate.h"
#include "host/executor.h"
#include "kernel_sim/sim_kernels.h"
#include "kernels/launch.h"
#include "transport/fifo.h"

namespace chorus::test {

// GPU mode zeroes a FIFO's memory when it allocates it (ConnRequest::
// deviceMemory), and the LL protocol relies on it: a zero flag matches no
// piece. Host-mode FIFOs are not zeroed, so each rank zeroes the slots of
// every FIFO the first time it meets it, before the ranks meet at `ready`.
void SimRank::zeroNewSlots(const std::vector<gpu::LaunchArrays>& launches) {
  for (const gpu::LaunchArrays& la : launches)
    for (const dev::DevFifo& f : la.fifos)
      if (zeroed_.insert(f.slots).second) std::memset(f.slots, 0, static_cast<size_t>(f.slotBytes) * f.nslots);
}

bool SimRank::runKernels(Plan& plan, SimOutcome* out) {
  const FifoEndTally::Positions before = positions_;
  std::vector<gpu::LaunchArrays> launches;
  const bool translated = translateRankPlan(ctx_, plan, &positions_, &launches);
  if (translated) {
    zeroNewSlots(launches);
    // An end the kernels meet for the first time starts where the FIFO is
    // (the host executor may have used it).
    for (auto& [key, position] : positions_) {
      if (before.count(key) != 0) continue;
      const auto* ctl = static_cast<const FifoControl*>(key.first);
      position = (key.second ? ctl->tail : ctl->head).load(std::memory_order_acquire);
    }
  }
  ready_.arrive_and_wait();
  if (!translated) return false;
  if (lateMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(lateMs));
  {
    std::lock_guard<std::mutex> lock(ctx_.comm->opMutex);
    stampPlan(plan);
  }
  static thread_local dev::LaneParams params;  // 32 KB: not on the stack
  OpPrint prints[dev::kLaunchMaxTasks];
  const int32_t neverAborted = 0;
  for (const gpu::LaunchArrays& la : launches) {
    dev::LaneLaunch L = gpu::launchHeader(plan, la, prints);
    L.abortFlag = abortFlag != nullptr ? abortFlag : &neverAborted;
    L.status = &out->record;
    L.timeoutNs = timeoutNs;
    L.threads = threads;
    if (dev::packLaneParams(L, typeSize(L.type), &params) != cudaSuccess) {
      ctx_.fail("rank %d: packLaneParams refused a launch", ctx_.rank);
      return false;
    }
    std::vector<std::string> faults;
    const bool ran = sim::runLaunch(params, &faults);
    out->faults.insert(out->faults.end(), faults.begin(), faults.end());
    if (!ran) {
      ctx_.fail("rank %d: %s", ctx_.rank, faults.empty() ? "?" : faults[0].c_str());
      return false;
    }
    if (out->record.status != 0) break;  // the GPU executor stops at a failed launch
  }
  return true;
}

ncclResult_t SimRank::runHostExecutor(Plan& plan) {
  FifoEndTally::Positions unused;
  std::vector<gpu::LaunchArrays> launches;
  ncclResult_t res = ncclInternalError;
  if (translateRankPlan(ctx_, plan, &unused, &launches)) {
    {
      std::lock_guard<std::mutex> lock(ctx_.comm->opMutex);
      stampPlan(plan);
    }
    Plan* plans[] = {&plan};
    res = runHostPlans(plans);
  }
  ready_.arrive_and_wait();
  return res;
}

}  // namespace chorus::test
