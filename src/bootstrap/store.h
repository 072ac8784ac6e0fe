// The key-value store that ranks rendezvous through. Communicator creation only
// needs "publish a value under a name" and "wait until these names exist", so
// every bootstrap exchange (address exchange, allgather, barrier, transport
// setup messages) is written against this small interface. Two implementations:
// MemStore (ranks that are threads of the process serving the store) and the
// TCP client (everyone else). Both are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/wait_limit.h"
#include "nccl.h"

namespace chorus {

using Clock = std::chrono::steady_clock;

// A wait bound: deadline plus an optional abort flag and an optional stop
// condition, both checked at least every ~50 ms (a stop condition is called
// from the waiting thread, possibly under a store's lock: it must not use the
// store). Either ends the wait as "aborted".
struct WaitBound {
  Clock::time_point deadline;
  const std::atomic<bool>* abort = nullptr;
  std::function<bool()> stop;
};

// How often blocking waits wake up to look at the abort flag.
constexpr std::chrono::milliseconds kWaitSlice{50};

// A fixed bound of `ms` (<= 0: already expired); saturates instead of overflowing.
inline WaitBound waitBoundAfter(int64_t ms, const std::atomic<bool>* abort = nullptr) {
  return WaitBound{deadlineAfterMs(ms), abort, {}};
}
// A bound from a CHORUS_*TIMEOUT_MS limit: 0 (or less) waits without a deadline.
inline WaitBound waitBoundLimit(int64_t limitMs, const std::atomic<bool>* abort = nullptr) {
  return WaitBound{deadlineAfterLimit(limitMs), abort, {}};
}
inline bool waitUnbounded(const WaitBound& b) { return b.deadline == Clock::time_point::max(); }
inline bool waitAborted(const WaitBound& b) {
  return (b.abort != nullptr && b.abort->load(std::memory_order_acquire)) || (b.stop && b.stop());
}

class Store {  // thread-safe
 public:
  virtual ~Store() = default;
  virtual ncclResult_t set(const std::string& key, std::vector<uint8_t> value) = 0;
  // Blocks until every key exists; returns their values in order. An unbounded
  // wait logs a WARN line every kWaitProgressPeriod naming the key. Times out with ncclRemoteError
  // ("bootstrap: timed out after N ms waiting for key ...") or returns ncclRemoteError/ncclSystemError
  // if the store connection is lost; abort -> ncclRemoteError "aborted".
  virtual ncclResult_t get(const std::vector<std::string>& keys, std::vector<std::vector<uint8_t>>* values,
                           const WaitBound& bound) = 0;
  // Atomic add on an integer counter (missing = 0); returns the new value.
  virtual ncclResult_t add(const std::string& key, int64_t delta, int64_t* result) = 0;
  // Removes every key starting with prefix (used when a communicator is destroyed).
  virtual ncclResult_t erasePrefix(const std::string& prefix) = 0;
};

// Records the failure of a get() that ended before its keys arrived, in the one
// wording every store uses. `firstMissing`/`missing` describe what was still
// absent; `where` names the store (e.g. "store server 10.0.0.1:4000").
ncclResult_t failStoreWait(bool aborted, Clock::time_point started, const std::string& firstMissing, size_t missing,
                           size_t total, const std::string& where);

// Counters are stored as 8 little-endian bytes so that get() on a counter key
// returns something every rank decodes the same way.
std::vector<uint8_t> encodeCounter(int64_t v);
bool decodeCounter(const std::vector<uint8_t>& bytes, int64_t* v);

}  // namespace chorus
