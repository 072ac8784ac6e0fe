// What a communicator is doing, for stall reports and the status dump
// (docs/reliability.md, "Stall reports"): how many operations it started and
// finished, which call is in flight, and since when and on whom it waits.
//
// The owning thread writes these fields with relaxed atomic stores at the
// start and end of every call (no lock, no clock read on the fast path); the
// status dump reads them from another thread. A reader may see the fields of
// two neighbouring calls mixed; that is acceptable for a diagnostic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/coll_types.h"
#include "nccl.h"

namespace chorus {

// One user call, in the API's terms.
struct CallSummary {
  CollType type = CollType::AllReduce;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;  // root of rooted collectives, peer of send/recv
};

// "AllReduce(1000 x float, sum)", "Broadcast(4096 x int8, root 2)", "Send(10 x float, to rank 1)".
std::string describeCall(const CallSummary& call);
const char* dtypeName(ncclDataType_t t);
// "sum", "prod", ..., "avg"; custom operators (ncclRedOpCreatePreMulSum) as "premulsum op N".
std::string redOpName(ncclRedOp_t op);

class OpActivity {
 public:
  // A call on this communicator (the first of `ntasks` grouped ones) starts;
  // `collectives` of them are collectives (numbered), the rest point-to-point.
  void begin(const CallSummary& first, int ntasks, int collectives);
  void end();

  // The executor saw no progress since `sinceUnixMs`, waiting on `peer`.
  void setWaiting(int64_t sinceUnixMs, int peer, bool receiving);

  // Number of the latest collective started (1-based; 0: none yet).
  uint64_t lastCollective() const { return collStarted_.load(std::memory_order_relaxed); }
  uint64_t collectivesDone() const { return collDone_.load(std::memory_order_relaxed); }

  struct Snapshot {
    bool inCall = false;
    CallSummary call;
    int ntasks = 0;
    uint64_t collStarted = 0, collDone = 0, p2pStarted = 0, p2pDone = 0;
    int64_t waitingSinceUnixMs = 0;  // 0: not known to wait
    int waitedPeer = -1;
    bool waitedReceiving = false;
  };
  Snapshot snapshot() const;

 private:
  std::atomic<bool> inCall_{false};
  std::atomic<int> type_{0}, dtype_{0}, op_{0}, root_{0}, ntasks_{0}, pendingColl_{0};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> collStarted_{0}, collDone_{0}, p2pStarted_{0}, p2pDone_{0};
  std::atomic<int64_t> waitingSince_{0};
  std::atomic<int> waitedPeer_{-1};
  std::atomic<bool> waitedReceiving_{false};
};

}  // namespace chorus
