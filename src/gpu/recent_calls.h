// The tasks of a GPU-mode communicator's latest calls, which its watchdog
// judges peers' setup notes against (plan/setup_notes.h,
// readNotesAgainstLaunched): a rank whose call was enqueued waits in no
// connection setup, so without this nobody on its side would read the note
// of a peer whose mismatched call waits there for it. Copied at launch (a
// cached plan's fingerprints change with every call); the oldest calls are
// dropped. Guarded by the communicator's opMutex. No CUDA: unit-tested on
// any machine.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "plan/blocked_calls.h"

namespace chorus::gpu {

class RecentCalls {
 public:
  static constexpr size_t kCalls = 8;
  void add(std::vector<CallTask> call) {
    calls_.push_back(std::move(call));
    if (calls_.size() > kCalls) calls_.pop_front();
  }
  // Every kept call's tasks, oldest call first.
  std::vector<CallTask> tasks() const {
    std::vector<CallTask> all;
    for (const std::vector<CallTask>& call : calls_) all.insert(all.end(), call.begin(), call.end());
    return all;
  }
  bool empty() const { return calls_.empty(); }

 private:
  std::deque<std::vector<CallTask>> calls_;
};

}  // namespace chorus::gpu
