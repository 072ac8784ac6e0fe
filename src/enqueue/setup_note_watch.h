// While connection setup waits for a peer's receiver handle, the setup notes
// (plan/setup_notes.h) that show the ranks' calls differ, read about every
// 50 ms from the waiting thread (a WaitBound stop condition). A thread that
// drives several communicators keeps one watch per plan and polls them all
// while any of its plans waits: a rank of the same thread whose plan made
// no new connector never waits itself, and only its watch reads the note
// of the rank that waits for it.
#pragma once

#include <chrono>

#include "core/op_fingerprint.h"
#include "nccl.h"

namespace chorus {

struct Plan;

class SetupNoteWatch {
 public:
  explicit SetupNoteWatch(const Plan& plan) : plan_(plan) {}
  // Reads the notes that arrived (at most once per 50 ms); true once a
  // mismatch or a peer's verdict was found. In GPU mode it also sends the
  // plan's note again to the ranks it still waits for (after 250 ms, then
  // less often, at least once a second): a peer
  // whose call was enqueued already reads notes from its GPU watchdog, which
  // may have taken an earlier copy before that call was made.
  bool poll();
  bool found() const { return found_; }
  // The mismatch as the caller's error; the verdict is left on the
  // communicator's connectors (kernels of GPU-mode peers stop on it).
  ncclResult_t error() const;

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirstResend{250};
  const Plan& plan_;
  Clock::time_point last_{};
  Clock::time_point lastSent_ = Clock::now();
  std::chrono::milliseconds resendAfter_ = kFirstResend;
  bool found_ = false, stoppedToo_ = false;
  OpMismatchRecord record_;
};

}  // namespace chorus
