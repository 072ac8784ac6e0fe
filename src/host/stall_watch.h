// Stall reports of the host executor (docs/reliability.md, "Stall reports").
// runHostPlans hands its idle checks to a StallWatch: after one second
// without progress it records on whom the call waits (for the status dump);
// from half the warning interval on it reads, about once a second, the notes
// other waiting ranks sent and answers them with its own; when no progress
// was made for CHORUS_STALL_WARN_S it sends its note to every peer, gathers
// theirs for up to two seconds (while the executor keeps polling) and logs one WARN line with the global
// picture (core/stall_report.h), then again after every further interval.
// Nothing here ends the wait: a stall is reported, never turned into an error.
// GPU mode uses the same watch from its watchdog (src/gpu/cuda/gpu_watchdog.cc):
// there the call has returned and the operation runs in kernels, whose lanes
// tell the host since when they wait and on whom (dev::LaneWaits).
#pragma once

#include <chrono>
#include <span>
#include <vector>

#include "core/stall_report.h"
#include "plan/plan.h"

namespace chorus {

// A communicator whose operation makes no progress: on whom it waits, and
// whether the operation runs on the device (GPU mode: the call returned).
struct StallSubject {
  ncclComm* comm = nullptr;
  int waitedPeer = -1;
  bool receiving = false;
  bool onDevice = false;
};

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Called from the executor's idle checks with the time of the last progress.
  void idle(std::span<Plan* const> plans, Clock::time_point lastProgress, Clock::time_point now);
  // GPU mode: the kernels of `subject.comm` made no progress since lastProgress.
  void idle(const StallSubject& subject, Clock::time_point lastProgress, Clock::time_point now);
  // GPU mode: the kernels progressed or finished; a recorded stall is over.
  void resumed();

 private:
  struct PerComm {
    ncclComm* comm = nullptr;
    int64_t nextReportMs = 0;    // idle time of the next report
    int64_t lastPollMs = -1000;  // idle time of the last look for notes
    int64_t gatherUntilMs = 0;   // nonzero while a report gathers notes: the idle time it logs at
    bool answered = false;       // sent our note since the last report
    std::map<int, StallNote> notes;
  };

  // Starts a new stall of `comms` (forgetting the last one) when the time of
  // the last progress changed; false while the stall is too young to record.
  bool begin(std::span<ncclComm* const> comms, Clock::time_point lastProgress, int64_t idleMs);
  void record(std::span<const StallSubject> subjects, int64_t idleMs);
  void watch(PerComm& st, int64_t idleMs);

  Clock::time_point since_{};
  bool recorded_ = false;
  bool onDevice_ = false;  // what was recorded is a device wait (cleared by resumed/begin)
  std::vector<PerComm> comms_;
};

}  // namespace chorus
