#include "host/executor.h"

#include <sched.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "core/comm.h"
#include "core/result.h"

namespace chorus {
namespace {


inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Escalating wait used when a whole pass made no progress.
class Backoff {
 public:
  explicit Backoff(int64_t spins) : spins_(spins) {}
  void reset() { idle_ = 0; }
  void wait() {
    ++idle_;
    if (idle_ < spins_) {
      cpuRelax();
    } else if (idle_ < spins_ + 200) {
      sched_yield();
    } else {
      const long us = std::min<long>(200, 1 + (idle_ - spins_ - 200) / 8);
      struct timespec ts {0, us * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  bool sleeping() const { return idle_ >= spins_; }

 private:
  int64_t spins_;
  int64_t idle_ = 0;
};

bool peerAlive(int pid) { return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH; }

// Describes what the first unfinished lane of `plan` is waiting for, and
// reports a dead peer process if one is among them.
ncclResult_t diagnose(HostPlan& plan, bool timedOut, int64_t timeoutMs) {
  ncclComm* comm = plan.comm;
  for (Lane& lane : plan.lanes) {
    if (lane.finished()) continue;
    HostStep& s = lane.steps[lane.cur];
    for (int i = 0; i < s.nRecv + s.nSend; ++i) {
      const FifoEnd& end = i < s.nRecv ? s.recv[i]->end() : s.send[i - s.nRecv]->end();
      if (!peerAlive(end.peerPid))
        return fail(ncclRemoteError, "rank %d: peer rank %d (pid %d) exited during the operation", comm->id.rank,
                    end.peer, end.peerPid);
    }
    if (timedOut) {
      int peer = s.nRecv ? s.recv[0]->end().peer : (s.nSend ? s.send[0]->end().peer : -1);
      return fail(ncclRemoteError,
                  "rank %d: no progress for %lld ms waiting on peer rank %d (%s); the peer is stuck, dead or "
                  "did not make the matching call (CHORUS_TIMEOUT_MS)",
                  comm->id.rank, static_cast<long long>(timeoutMs), peer, s.nRecv ? "receiving" : "sending");
    }
  }
  return ncclSuccess;
}

ncclResult_t checkFlags(HostPlan& plan) {
  ncclComm* comm = plan.comm;
  if (comm->abortFlag.load(std::memory_order_relaxed))
    return fail(ncclInvalidUsage, "rank %d: operation ended by ncclCommAbort", comm->id.rank);
  if (comm->revoked.load(std::memory_order_relaxed))
    return fail(ncclInvalidUsage, "rank %d: operation ended by ncclCommRevoke", comm->id.rank);
  return ncclSuccess;
}

// Idle-time checks; returns an error when the group must stop.
ncclResult_t idleChecks(std::span<HostPlan* const> plans, Clock::time_point lastProgress) {
  const auto now = Clock::now();
  for (HostPlan* p : plans) {
    CHORUS_CHECK(checkFlags(*p));
    const int64_t timeoutMs = p->comm->config.timeoutMs;
    const bool timedOut = now - lastProgress > std::chrono::milliseconds(timeoutMs);
    CHORUS_CHECK(diagnose(*p, timedOut, timeoutMs));
  }
  return ncclSuccess;
}

void markFailed(std::span<HostPlan* const> plans, ncclResult_t res) {
  for (HostPlan* p : plans) commSetError(p->comm, res, lastErrorMessage());
}

}  // namespace

ncclResult_t runHostPlans(std::span<HostPlan* const> plans) {
  int64_t spins = plans.empty() ? 0 : plans[0]->comm->config.spinCount;
  Backoff backoff(spins);
  auto lastProgress = Clock::now();
  auto lastCheck = lastProgress;
  constexpr int kPiecesPerVisit = 16;  // fairness between lanes
  for (;;) {
    bool pending = false, progressed = false;
    ncclResult_t err = ncclSuccess;
    for (HostPlan* p : plans) {
      for (Lane& lane : p->lanes) {
        for (int i = 0; i < kPiecesPerVisit && progressLane(lane, &err); ++i) progressed = true;
        if (err != ncclSuccess) {
          markFailed(plans, err);
          return err;
        }
        pending |= !lane.finished();
      }
    }
    if (!pending) return ncclSuccess;
    if (progressed) {
      backoff.reset();
      lastProgress = Clock::now();
      continue;
    }
    backoff.wait();
    if (!backoff.sleeping()) continue;
    const auto now = Clock::now();
    if (now - lastCheck < std::chrono::milliseconds(50)) continue;
    lastCheck = now;
    ncclResult_t res = idleChecks(plans, lastProgress);
    if (res != ncclSuccess) {
      markFailed(plans, res);
      return res;
    }
  }
}

}  // namespace chorus
