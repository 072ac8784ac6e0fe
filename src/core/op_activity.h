// What a communicator is doing, for stall reports and the status dump
// (docs/reliability.md, "Stall reports"): how many operations it started and
// finished, which call is in flight, and since when and on whom it waits.
//
// The owning thread writes these fields with relaxed atomic stores at the
// start and end of every call (no lock, and no locked read-modify-write:
// the calls on one communicator run one at a time under its opMutex, so a
// counter is bumped with a plain load and store; the end reads the coarse monotonic
// clock, a few ns, so that a peer can be told how long this rank has been
// outside the library); the status dump and the mailbox thread answering a
// peer's status query (core/rank_status.h) read them from other threads. A reader may see the fields of
// two neighbouring calls mixed; that is acceptable for a diagnostic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/op_fingerprint.h"

namespace chorus {

// "AllReduce(1000 x float, sum)": the call a fingerprint describes (describeOpPrint).
std::string describeCall(const OpPrint& call);

class OpActivity {
 public:
  OpActivity();

  // A call on this communicator starts: `first` is the fingerprint of the
  // first of its `ntasks` grouped operations (numbered by OpCounters),
  // `collectives` of them are collectives, the rest point-to-point.
  void begin(const OpPrint& first, int ntasks, int collectives);
  // The call returns (nothing if begin was not reached).
  void end();

  // The executor saw no progress since `sinceUnixMs`, waiting on `peer`.
  void setWaiting(int64_t sinceUnixMs, int peer, bool receiving);
  // GPU mode, where the call returns before its kernels run: the watchdog saw
  // them make no progress since `sinceUnixMs` (0: they progress again). While
  // set, snapshots show the latest call as in flight (not completed).
  void setDeviceWaiting(int64_t sinceUnixMs, int peer, bool receiving);

  // Number of the latest collective started (1-based; 0: none yet).
  uint64_t lastCollective() const { return collStarted_.load(std::memory_order_relaxed); }
  uint64_t collectivesDone() const { return collDone_.load(std::memory_order_relaxed); }

  // Milliseconds since the last call returned (since creation before the first).
  int64_t msSinceLastCall() const;

  struct Snapshot {
    bool inCall = false;
    OpPrint call;
    int ntasks = 0;
    uint64_t collStarted = 0, collDone = 0, p2pStarted = 0, p2pDone = 0;
    int64_t waitingSinceUnixMs = 0;  // 0: not known to wait
    int waitedPeer = -1;
    bool waitedReceiving = false;
  };
  Snapshot snapshot() const;

 private:
  std::atomic<bool> inCall_{false};
  std::atomic<uint64_t> call_[3] = {};  // the OpPrint of begin(), word by word
  std::atomic<int> ntasks_{0}, pendingColl_{0};
  std::atomic<uint64_t> collStarted_{0}, collDone_{0}, p2pStarted_{0}, p2pDone_{0};
  std::atomic<int64_t> waitingSince_{0};
  std::atomic<int64_t> deviceWaitingSince_{0};
  std::atomic<int> waitedPeer_{-1};
  std::atomic<bool> waitedReceiving_{false};
  std::atomic<int64_t> lastEndMs_{0};  // coarse monotonic clock
};

}  // namespace chorus
