// A GPU-mode communicator's device-side resources (CUDA builds only).
//
//   abort flag    one int in pinned, mapped host memory; ncclCommAbort (and the
//                 watchdog, when a peer process dies) sets it, every waiting
//                 kernel thread sees it within ~1024 spins and stops.
//   status        the first failure any kernel of the communicator recorded
//                 (lane, peer, reason), in pinned, mapped host memory, read by
//                 commPollError without synchronizing with the GPU.
//   waits         since when each lane of the running launch makes no
//                 progress, and on whom it waits (pinned, mapped host
//                 memory), read by the watchdog for the stall report.
//   positions     one device-memory counter per connector end: how many pieces
//                 that end has moved. They live as long as the communicator,
//                 so consecutive launches and CUDA graph replays continue
//                 where the previous one stopped.
//   in flight     one event per stream the communicator launched on, recorded
//                 after its last launch, so destroy and abort know when the
//                 kernels are done (bounded waits, never a hang).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "gpu/gpu_runtime.h"
#include "gpu/recent_calls.h"
#include "kernels/lane_plan.h"
#include "transport/fifo.h"

namespace chorus::gpu {

// Device counters handed out in zeroed blocks; never freed before the communicator.
class PositionPool {
 public:
  ~PositionPool();
  // The counter of one connector end (created zeroed on first request); null on failure.
  uint64_t* counterFor(const FifoControl* fifo, bool sender);
  // Frees every counter (on the current device: the caller's scope).
  void release();

 private:
  static constexpr size_t kBlock = 1024;
  std::map<std::pair<const FifoControl*, bool>, uint64_t*> counters_;
  std::vector<uint64_t*> blocks_;
  size_t usedInBlock_ = kBlock;
};

struct CommState {
  int device = -1;
  int ranksOnDevice = 1;  // ranks of this communicator sharing the GPU (threads or processes)
  int maxLanes = 0;       // blocks one launch may use so all those ranks' kernels fit at once
  int threadsPerLane = 512;
  int32_t* abortHost = nullptr;  // pinned, mapped
  int32_t* abortDevice = nullptr;
  dev::LaneStatusRecord* statusHost = nullptr;  // pinned, mapped
  dev::LaneStatusRecord* statusDevice = nullptr;
  dev::LaneWaits* waitsHost = nullptr;  // pinned, mapped: what the lanes wait on (stall reports)
  dev::LaneWaits* waitsDevice = nullptr;
  PositionPool positions;
  std::mutex launchMutex;  // guards inFlight, last and lastStream
  // By stream id (cudaStreamGetId), not handle: cudaStreamPerThread names
  // another stream in every thread, and a destroyed stream's handle may come
  // back for a new one.
  std::map<unsigned long long, cudaEvent_t> inFlight;
  // The communicator's most recent launch: a launch on another stream waits
  // for it, so two of its kernels never run at once on the same connectors
  // (NCCL orders a communicator's work the same way). Captured launches wait
  // for it and record it as external nodes, so a graph replay and eager
  // launches are ordered too; once a graph holds such a node (`captured`),
  // every eager launch waits for it, whatever its stream.
  cudaEvent_t last = nullptr;
  unsigned long long lastStream = 0;  // its id
  bool launchedBefore = false;
  bool captured = false;
  std::atomic<bool> errorReported{false};
  bool verdictSpread = false;             // the watchdog spread a mismatch (spreadVerdict)
  RecentCalls recentCalls;                // the tasks of recent launches (under the comm's opMutex)
  std::vector<cudaEvent_t> spareMarkers;  // events recentCalls let go, for reuse (same guard)

  ~CommState();
  // Waits until every recorded launch finished, at most `boundMs`; false on timeout.
  bool waitIdle(int64_t boundMs);
  // The same, calling `watch` about every 50 ms while the kernels run.
  bool waitIdle(int64_t boundMs, const std::function<void()>& watch);
  // Whether kernels launched through the communicator may still be running.
  bool busy();
};

// Whether the work behind a RecentCalls marker (an event) finished.
bool markerFinished(void* marker);

// The translated launches of a plan (Plan::deviceForm).
struct DeviceForm;

}  // namespace chorus::gpu
