// The tasks of a GPU-mode communicator's recent calls, which its watchdog
// judges peers' setup notes against (plan/setup_notes.h,
// readNotesAgainstLaunched): a rank whose call was enqueued waits in no
// connection setup, so without this nobody on its side would read the note
// of a peer whose mismatched call waits there for it. Copied at launch (a
// cached plan's fingerprints change with every call).
//
// Which calls are kept: every call from the oldest one whose work has not
// finished on (a stuck call stays however many calls the application
// enqueues behind it), and at least the kKeep latest (a peer may still wait
// on a call that finished here: a Broadcast's root is done before its
// receivers took the data); never more than kMaxCalls. Each call has a
// marker that tells whether its work finished (the CUDA side: an event
// recorded after its kernels; null: finished, e.g. a call captured into a
// graph). Guarded by the communicator's opMutex. No CUDA here: unit-tested
// on any machine.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "plan/blocked_calls.h"

namespace chorus::gpu {

class RecentCalls {
 public:
  static constexpr size_t kKeep = 8;
  static constexpr size_t kMaxCalls = 1024;

  // Forgets the finished calls at the front beyond the kKeep latest
  // (`finished(marker)` says whether a call's work is done), and the oldest
  // beyond kMaxCalls; their markers go to *forgotten, for reuse.
  template <class Finished>
  void prune(Finished&& finished, std::vector<void*>* forgotten) {
    while (calls_.size() > kMaxCalls ||
           (calls_.size() > kKeep && (calls_.front().marker == nullptr || finished(calls_.front().marker)))) {
      if (calls_.front().marker != nullptr) forgotten->push_back(calls_.front().marker);
      calls_.pop_front();
    }
  }
  void add(std::vector<CallTask> tasks, void* marker) { calls_.push_back({std::move(tasks), marker}); }
  // Every kept call's tasks, oldest call first.
  std::vector<CallTask> tasks() const {
    std::vector<CallTask> all;
    for (const Call& c : calls_) all.insert(all.end(), c.tasks.begin(), c.tasks.end());
    return all;
  }
  // The markers still held (freed with the communicator).
  std::vector<void*> markers() const {
    std::vector<void*> all;
    for (const Call& c : calls_)
      if (c.marker != nullptr) all.push_back(c.marker);
    return all;
  }
  size_t size() const { return calls_.size(); }

 private:
  struct Call {
    std::vector<CallTask> tasks;
    void* marker = nullptr;
  };
  std::deque<Call> calls_;
};

}  // namespace chorus::gpu
