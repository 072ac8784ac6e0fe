// CHORUS_TIMEOUT_MS and CHORUS_INIT_TIMEOUT_MS as the library uses them: an
// optional limit on how long one wait may go without progress. 0 means no
// limit (the wait goes on while the peer lives; a dead peer or a broken link
// still ends it at once). The raw knob is normalised here once, at
// communicator creation (core/comm_config.cc), so that negative values mean
// "no limit" and huge ones saturate instead of overflowing a time_point.
#pragma once

#include <chrono>
#include <cstdint>

namespace chorus {

// Largest limit kept, about 31 years: steady_clock::now() plus this never overflows.
constexpr int64_t kMaxWaitLimitMs = int64_t{1} << 40;
// How often a wait without a limit says that it is still waiting.
constexpr std::chrono::seconds kWaitProgressPeriod{30};

// Fixed bounds that do not depend on the knobs:
// - how long closing a connection waits for the peer to take data that was
//   posted but not yet sent (after a successful finalize there is none), and
//   how long destroy waits for the proxy to close its connections;
constexpr int64_t kCloseDrainMs = 10000;
// - how long a built-in network backend's connection setup step (TCP connect
//   to a published listener, the IB or UCX handshake) may take.
constexpr int64_t kNetSetupBoundMs = 30000;

// Raw knob value -> limit in ms; 0 = no limit.
constexpr int64_t normalizeWaitLimitMs(int64_t raw) {
  if (raw <= 0) return 0;
  return raw > kMaxWaitLimitMs ? kMaxWaitLimitMs : raw;
}

// The deadline of a wait that starts at `from` under `limitMs` (0: never).
inline std::chrono::steady_clock::time_point deadlineAfterLimit(
    int64_t limitMs, std::chrono::steady_clock::time_point from = std::chrono::steady_clock::now()) {
  if (limitMs <= 0) return std::chrono::steady_clock::time_point::max();
  return from + std::chrono::milliseconds(normalizeWaitLimitMs(limitMs));
}

// Saturating `from + ms` for fixed internal bounds (ms <= 0: `from`).
inline std::chrono::steady_clock::time_point deadlineAfterMs(
    int64_t ms, std::chrono::steady_clock::time_point from = std::chrono::steady_clock::now()) {
  return from + std::chrono::milliseconds(ms <= 0 ? 0 : normalizeWaitLimitMs(ms));
}

// Paces "still waiting" log lines of an unbounded wait: true every kWaitProgressPeriod.
class WaitProgress {
 public:
  explicit WaitProgress(std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now())
      : started_(started), next_(started + kWaitProgressPeriod) {}
  bool due(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    if (now < next_) return false;
    next_ = now + kWaitProgressPeriod;
    return true;
  }
  long long secondsWaited(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(now - started_).count());
  }

 private:
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace chorus
