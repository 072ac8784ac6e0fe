// Stall reports of the host executor (docs/reliability.md, "Stall reports").
// runHostPlans hands its idle checks to a StallWatch: after one second
// without progress it records on whom the call waits (for the status dump);
// from half the warning interval on it reads, about once a second, the notes
// other waiting ranks sent and answers them with its own; when no progress
// was made for CHORUS_STALL_WARN_S it sends its note to every peer, gathers
// theirs for up to two seconds (while the executor keeps polling) and logs one WARN line with the global
// picture (core/stall_report.h), then again after every further interval.
// Nothing here ends the wait: a stall is reported, never turned into an error.
#pragma once

#include <chrono>
#include <span>
#include <vector>

#include "core/stall_report.h"
#include "plan/plan.h"

namespace chorus {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Called from the executor's idle checks with the time of the last progress.
  void idle(std::span<Plan* const> plans, Clock::time_point lastProgress, Clock::time_point now);

 private:
  struct PerComm {
    ncclComm* comm = nullptr;
    int64_t nextReportMs = 0;    // idle time of the next report
    int64_t lastPollMs = -1000;  // idle time of the last look for notes
    int64_t gatherUntilMs = 0;   // nonzero while a report gathers notes: the idle time it logs at
    bool answered = false;       // sent our note since the last report
    std::map<int, StallNote> notes;
  };

  void reset(std::span<Plan* const> plans, Clock::time_point lastProgress);
  void watch(Plan& plan, PerComm& st, int64_t idleMs);

  Clock::time_point since_{};
  bool recorded_ = false;
  std::vector<PerComm> comms_;
};

}  // namespace chorus
