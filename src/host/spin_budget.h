// How many polls a waiting host-executor thread spins before it starts to
// yield, learned per thread from how its peers answer.
//
// Spinning pays off only while the peer runs on another CPU. When the
// scheduler has put the peer on this thread's CPU (ranks as threads, or
// processes nobody bound to cores), every poll of the spin phase is wasted:
// the peer cannot answer until this thread yields, so each hand-over costs
// the whole budget (~20 us at the default of 500 polls) instead of a context
// switch. The waits tell the two cases apart:
//  * the peer answered while this thread spun, or right after a yield that
//    gave the CPU to nobody: it runs elsewhere, so spin longer (doubling, up
//    to the configured CHORUS_SPIN_COUNT);
//  * the answer came right after a yield that handed the CPU to another task
//    for a short while (under kPeerHandoff): most likely that task was the
//    peer, so yield at once from now on.
// A yield that lost the CPU for longer says nothing (another program took
// the core for a time slice), and neither does an answer after sleeping.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace chorus {

class SpinBudget {
 public:
  // A CPU hand-over shorter than this is taken for the peer's turn; a time
  // slice of another program lasts longer (the scheduler's base slice is
  // 0.75 ms and more).
  static constexpr std::chrono::microseconds kPeerHandoff{200};
  // Where growing starts from when the budget was cut to zero.
  static constexpr int64_t kRegrowFrom = 16;

  // Starts at the ceiling: spinning is assumed useful until a wait says otherwise.
  constexpr explicit SpinBudget(int64_t ceiling) : ceiling_(ceiling), polls_(ceiling) {}

  // The configured budget may differ per call (per communicator): the learned
  // one never exceeds it, and a raised ceiling is reached again by growing.
  void setCeiling(int64_t ceiling) {
    ceiling_ = std::max<int64_t>(ceiling, 0);
    polls_ = std::min(polls_, ceiling_);
  }
  int64_t polls() const { return polls_; }
  int64_t ceiling() const { return ceiling_; }

  // The peer answered while this thread was spinning.
  void answeredWhileSpinning() { grow(); }

  // The peer answered right after a sched_yield; `switched`: the yield ran
  // another task, `away`: how long the yield took.
  void answeredAfterYield(bool switched, std::chrono::nanoseconds away) {
    if (!switched)
      grow();
    else if (away < kPeerHandoff)
      polls_ = 0;
  }

 private:
  void grow() { polls_ = std::min(ceiling_, std::max(kRegrowFrom, polls_ * 2)); }

  int64_t ceiling_;
  int64_t polls_;
};

}  // namespace chorus
