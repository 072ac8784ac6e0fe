#include "host/executor.h"

#include <sched.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <string>

#include "core/comm.h"
#include "core/result.h"
#include "host/stream_copy.h"

namespace chorus {
namespace {


inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Escalating wait used when a whole pass made no progress: a few polls with
// the CPU's pause hint (the peer usually answers within a microsecond when it
// has its own core), then sched_yield for up to ~2 ms (hands the core to a
// rank that can progress when ranks outnumber cores), then sleeps growing to
// 200 us so an idle wait costs almost no CPU.
class Backoff {
 public:
  explicit Backoff(int64_t spins) : spins_(spins) {}
  void reset() { idle_ = 0; }
  void wait() {
    if (idle_++ < spins_) {
      cpuRelax();
      return;
    }
    if (idle_ == spins_ + 1) yieldStart_ = std::chrono::steady_clock::now();
    const auto idleFor = std::chrono::steady_clock::now() - yieldStart_;
    if (idleFor < std::chrono::milliseconds(2)) {
      sched_yield();
      return;
    }
    const long us = std::min<long>(200, 1 + std::chrono::duration_cast<std::chrono::milliseconds>(idleFor).count());
    struct timespec ts {0, us * 1000};
    nanosleep(&ts, nullptr);
  }
  bool pastSpinning() const { return idle_ > spins_; }

 private:
  int64_t spins_;
  int64_t idle_ = 0;
  std::chrono::steady_clock::time_point yieldStart_{};
};

// Fails if any peer process on this host has exited. Every peer is checked,
// not only the ones this rank waits on, so the error names the rank that
// died rather than a survivor that is itself stuck behind it.
ncclResult_t checkPeersAlive(HostPlan& plan) {
  ncclComm* comm = plan.comm;
  const PeerInfo& self = comm->conns->peer(comm->id.rank);
  std::string dead;
  int ndead = 0;
  for (const PeerInfo& p : comm->conns->peers()) {
    if (p.rank == self.rank || p.hostHash != self.hostHash || p.processToken == self.processToken) continue;
    if (peerProcessAlive(p.pid)) continue;
    dead += std::string(ndead++ ? ", " : "") + "peer rank " + std::to_string(p.rank) + " (pid " +
            std::to_string(p.pid) + ")";
  }
  if (ndead == 0) return ncclSuccess;
  return fail(ncclRemoteError, "rank %d: %s exited during the operation", comm->id.rank, dead.c_str());
}

// Names the peer the first unfinished lane of `plan` is waiting for.
ncclResult_t reportTimeout(HostPlan& plan, int64_t timeoutMs) {
  ncclComm* comm = plan.comm;
  for (Lane& lane : plan.lanes) {
    if (lane.finished()) continue;
    HostStep& s = lane.steps[lane.cur];
    int peer = s.nRecv ? s.recv[0]->end().peer : (s.nSend ? s.send[0]->end().peer : -1);
    return fail(ncclRemoteError,
                "rank %d: no progress for %lld ms waiting on peer rank %d (%s); the peer is stuck, dead or "
                "did not make the matching call (CHORUS_TIMEOUT_MS)",
                comm->id.rank, static_cast<long long>(timeoutMs), peer, s.nRecv ? "receiving" : "sending");
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

// Fails if a connector a waiting lane needs has a broken network link. Only
// current steps count: a peer that finished and closed its links is fine
// unless this rank still needs them.
ncclResult_t checkLinks(HostPlan& plan) {
  for (const Lane& lane : plan.lanes) {
    if (lane.finished()) continue;
    const HostStep& s = lane.steps[lane.cur];
    for (int i = 0; i < s.nRecv; ++i) CHORUS_CHECK(plan.comm->conns->checkLink(s.recv[i]->end()));
    for (int i = 0; i < s.nSend; ++i) CHORUS_CHECK(plan.comm->conns->checkLink(s.send[i]->end()));
  }
  return ncclSuccess;
}

// Idle-time checks; returns an error when the group must stop.
ncclResult_t idleChecks(std::span<HostPlan* const> plans, Clock::time_point lastProgress) {
  const auto now = Clock::now();
  for (HostPlan* p : plans) {
    CHORUS_CHECK(checkFlags(*p));
    const int64_t timeoutMs = p->comm->config.timeoutMs;
    CHORUS_CHECK(checkPeersAlive(*p));
    CHORUS_CHECK(checkLinks(*p));
    // 0: no limit (a dead peer or a broken link is still caught just above).
    if (timeoutMs > 0 && now - lastProgress > std::chrono::milliseconds(timeoutMs))
      CHORUS_CHECK(reportTimeout(*p, timeoutMs));
  }
  return ncclSuccess;
}

void markFailed(std::span<HostPlan* const> plans, ncclResult_t res) {
  for (HostPlan* p : plans) commSetError(p->comm, res, lastErrorMessage());
}

}  // namespace

// A peer process counts as gone when it no longer exists or is a zombie
// (exited, not yet reaped by its parent).
bool peerProcessAlive(int pid) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0) return errno != ESRCH;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == nullptr) return true;
  char state = 0;
  // Format: pid (comm) state ...; comm may contain spaces, so find the last ')'.
  char buf[512];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close = strrchr(buf, ')');
  if (close != nullptr && close[1] == ' ') state = close[2];
  return state != 'Z' && state != 'X';
}

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
    if (!pending) {
      host::streamFence();
      return ncclSuccess;
    }
    if (progressed) {
      backoff.reset();
      lastProgress = Clock::now();
      continue;
    }
    backoff.wait();
    if (!backoff.pastSpinning()) continue;
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
