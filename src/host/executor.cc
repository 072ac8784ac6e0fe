#include "host/executor.h"

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/result.h"
#include "host/dead_peer.h"
#include "host/link_sleep.h"
#include "host/spin_budget.h"
#include "host/stall_watch.h"
#include "host/stream_copy.h"
#include "kernels/common/step_rules.h"
#include "plan/lane_failure.h"
#include "plan/setup_notes.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How often this thread lost its CPU without blocking: a sched_yield that
// ran another task adds one.
long involuntarySwitches() {
  struct rusage usage {};
  return getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nivcsw : 0;
}

// Escalating wait used when a whole pass made no progress: a few polls with
// the CPU's pause hint (the peer usually answers within a microsecond when it
// has its own core; how many is learned per thread, host/spin_budget.h), then
// sched_yield for up to ~2 ms (hands the core to a rank that can progress
// when ranks share cores), then sleeps growing to 200 us so an idle wait
// costs almost no CPU. Where every waiting lane waits on network links the
// thread moves itself, it sleeps on their sockets instead of yielding when
// ranks outnumber CPUs (host/link_sleep.h), and instead of the timed sleeps
// always: a message that arrives then wakes it at once.
class Backoff {
 public:
  explicit Backoff(int64_t spins) : budget_(learnedBudget()) { budget_.setCeiling(spins); }
  ~Backoff() { learnedBudget() = budget_; }
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  // A pass made progress: what the wait before it says about where the peer runs.
  void progressed() {
    if (phase_ == Phase::kSpin)
      budget_.answeredWhileSpinning();
    else if (phase_ == Phase::kYield)
      budget_.answeredAfterYield(lastYieldSwitched_, lastYieldTook_);
    phase_ = Phase::kNone;
    idle_ = 0;
  }

  void wait(std::span<Plan* const> plans) {
    if (idle_++ < budget_.polls()) {
      phase_ = Phase::kSpin;
      cpuRelax();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (phase_ != Phase::kYield && phase_ != Phase::kSleep) yieldStart_ = now;
    if (now - yieldStart_ < std::chrono::milliseconds(2)) {
      if (budget_.ceiling() == 0 && sleeper_.sleep(plans, kLinkSleepUs)) {
        phase_ = Phase::kYield;  // nothing to learn with no spin budget
        return;
      }
      yieldOnce();
      return;
    }
    phase_ = Phase::kSleep;
    const auto idleFor = now - yieldStart_;
    const long us = std::min<long>(200, 1 + std::chrono::duration_cast<std::chrono::milliseconds>(idleFor).count());
    if (sleeper_.sleep(plans, us)) return;
    const timespec ts{0, us * 1000};
    nanosleep(&ts, nullptr);
  }
  bool pastSpinning() const { return phase_ == Phase::kYield || phase_ == Phase::kSleep; }

 private:
  enum class Phase { kNone, kSpin, kYield, kSleep };
  // A sleep on sockets in place of one yield: a message wakes it at once, so
  // the bound only matters when nothing comes (the network proxy leaves the
  // links to the executor meanwhile). Shorter bounds wake a rank whose peer
  // is off its core again and again: at 200 us the 2 x 2 gain measured
  // about gone (docs/performance.md).
  static constexpr int64_t kLinkSleepUs = 1000;

  void yieldOnce() {
    phase_ = Phase::kYield;
    if (budget_.ceiling() == 0) {  // nothing to learn (CHORUS_SPIN_COUNT=0, or ranks outnumber CPUs)
      sched_yield();
      return;
    }
    const long switchesBefore = involuntarySwitches();
    const auto before = std::chrono::steady_clock::now();
    sched_yield();
    lastYieldTook_ = std::chrono::steady_clock::now() - before;
    lastYieldSwitched_ = involuntarySwitches() != switchesBefore;
  }

  // What this thread learned in its earlier waits (the budget outlives one
  // call). Constant-initialized, so reaching it checks no initialization
  // guard. (Not in the static TLS block: a library that programs such as
  // Python load with dlopen cannot count on room there.)
  static SpinBudget& learnedBudget() {
    static thread_local constinit SpinBudget budget(std::numeric_limits<int64_t>::max());
    return budget;
  }

  SpinBudget budget_;
  LinkSleeper sleeper_;
  int64_t idle_ = 0;
  Phase phase_ = Phase::kNone;
  bool lastYieldSwitched_ = false;
  std::chrono::nanoseconds lastYieldTook_{0};
  std::chrono::steady_clock::time_point yieldStart_{};
};

// Fails if a peer process on this host has exited while this rank still
// needs it (host/dead_peer.h); a peer that delivered its part and left is
// fine. `firstSeen`: when this call first saw a dead peer of the plan.
ncclResult_t checkPeersAlive(Plan& plan, Clock::time_point now, Clock::time_point& firstSeen) {
  const std::vector<int> dead = deadLocalPeers(plan);
  if (dead.empty()) return ncclSuccess;
  if (firstSeen == Clock::time_point{}) firstSeen = now;
  return checkDeadPeersNeeded(plan, dead, now - firstSeen >= std::chrono::milliseconds(kDeadPeerDrainMs));
}

// Names the peer the first unfinished lane of `plan` is waiting for.
ncclResult_t reportTimeout(Plan& plan, int64_t timeoutMs) {
  for (Lane& lane : plan.lanes) {
    const ActiveStep* a = waitingStep(plan, lane);
    if (a == nullptr) continue;
    const step::PeerOf waited = step::waitedConnector(a->desc);
    const int peer = waited.connector == sched::kNoConn ? -1 : plan.conns[waited.connector].end().peer;
    step::LaneFailure f =
        step::waitFailure(step::LaneStatus::TimedOut, static_cast<int>(&lane - plan.lanes.data()), peer);
    f.detail = waited.receiving ? 1 : 0;
    return laneFailureError(f, plan.comm->id.rank, timeoutMs);
  }
  // Every lane is done; a receiver has not taken what this rank sent, or not completed.
  int peer = -1;
  for (const ConnRef& c : plan.conns)
    if (peer < 0 && c.send != nullptr && !c.send->drained()) peer = c.end().peer;
  if (peer < 0) peer = awaitedCompletion(plan);
  if (peer < 0) return ncclSuccess;
  step::LaneFailure f = step::waitFailure(step::LaneStatus::TimedOut, -1, peer);
  return laneFailureError(f, plan.comm->id.rank, timeoutMs);
}

// Fails if a peer left a verdict on one of the communicator's connectors, or
// sent a slot of an operation this rank runs differently: the ranks' calls
// do not match. Passes the verdict on to this rank's other neighbours.
ncclResult_t checkVerdicts(Plan& plan) {
  step::LaneFailure f = step::waitFailure(step::LaneStatus::OpMismatch, -1, -1);
  bool self = false;
  if (findStraySlot(plan, &f.mismatch) || findStrayWait(plan, &f.mismatch)) {
    sendVerdictNotes(plan, f.mismatch);  // also for ranks that wait in connection setup
  } else if (!findMismatch(plan, &f.mismatch) && !readSetupNotes(plan, &f.mismatch, &self)) {
    return ncclSuccess;
  }
  spreadMismatch(plan, f.mismatch);
  return laneFailureError(f, plan.comm->id.rank, 0);
}

ncclResult_t checkFlags(Plan& plan) { return commEndedByCaller(plan.comm); }

// Fails if a connector a waiting lane needs has a broken network link. Only
// current steps count: a peer that finished and closed its links is fine
// unless this rank still needs them.
ncclResult_t checkLinks(Plan& plan) {
  for (Lane& lane : plan.lanes) {
    const ActiveStep* a = waitingStep(plan, lane);
    if (a == nullptr) continue;
    for (int i = 0; i < a->desc.nRecv; ++i) CHORUS_CHECK(plan.comm->conns->checkLink(a->recv[i]->end()));
    for (int i = 0; i < a->desc.nSend; ++i) CHORUS_CHECK(plan.comm->conns->checkLink(a->send[i]->end()));
  }
  return ncclSuccess;
}

// A call idle this long tells the ranks its plan talks to what it waits in
// (a setup note, plan/setup_notes.h), as a call that makes connectors does
// at setup: two ranks whose calls wait on each other over connectors that
// exist already exchange no slot and no other note. One message per peer
// and stalled call; a matching call never idles this long in a healthy job
// but for a late peer, which the note cannot mistake for a mismatch.
constexpr std::chrono::milliseconds kNoteWhenIdle(250);

// What one call's idle checks remember per plan.
struct IdleState {
  Clock::time_point deathSeen{};  // when a dead peer of the plan was first seen
  bool noted = false;             // its setup notes went out
};

void noteTheWait(Plan& plan, IdleState& st, Clock::duration idle) {
  if (st.noted || idle < kNoteWhenIdle || plan.comm->bootstrap == nullptr) return;
  st.noted = true;
  std::vector<int> peers;
  for (const ConnRef& c : plan.conns) {
    const int peer = c.end().peer;
    if (peer >= 0 && std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  }
  sendSetupNotes(plan, peers);
}

// Idle-time checks; returns an error when the group must stop. `state`
// (per plan, sized here: a call that never idles allocates nothing) and
// `stalls` keep their state across the checks of one call.
ncclResult_t idleChecks(std::span<Plan* const> plans, Clock::time_point lastProgress, std::vector<IdleState>& state,
                        StallWatch* stalls) {
  const auto now = Clock::now();
  if (state.size() != plans.size()) state.resize(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    Plan* p = plans[i];
    CHORUS_CHECK(checkFlags(*p));
    CHORUS_CHECK(checkVerdicts(*p));
    noteTheWait(*p, state[i], now - lastProgress);
    const int64_t timeoutMs = p->comm->config.timeoutMs;
    CHORUS_CHECK(checkPeersAlive(*p, now, state[i].deathSeen));
    CHORUS_CHECK(checkLinks(*p));
    // 0: no limit (a dead peer or a broken link is still caught just above).
    if (timeoutMs > 0 && now - lastProgress > std::chrono::milliseconds(timeoutMs))
      CHORUS_CHECK(reportTimeout(*p, timeoutMs));
  }
  stalls->idle(plans, lastProgress, now);  // reports, never fails the call
  return ncclSuccess;
}

// A plan succeeds only once its receivers took (and so checked the
// fingerprints of) everything it sent, and the roots it waits for finished.
bool planSettled(const Plan& p) { return p.finishesWithLanes || (sendsTaken(p) && rootsDone(p)); }

bool allSettled(std::span<Plan* const> plans) {
  for (Plan* p : plans)
    if (!planSettled(*p)) return false;
  return true;
}

// A finished plan's completion marks, where its peers wait for them.
void markDone(std::span<Plan* const> plans) {
  for (Plan* p : plans)
    if (!p->finishesWithLanes) markPlanDone(*p);
}

// The call fails and its buffers may go away at once: no network link may
// go on reading user memory it was handed (FifoEnd::sendsUserMemory).
void markFailed(std::span<Plan* const> plans, ncclResult_t res) {
  for (Plan* p : plans) {
    commSetError(p->comm, res, lastErrorMessage());
    for (const ConnRef& c : p->conns) c.send != nullptr ? c.send->dropUserMemory() : c.recv->dropUserMemory();
  }
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

ncclResult_t runHostPlans(std::span<Plan* const> plans) {
  int64_t spins = plans.empty() ? 0 : plans[0]->comm->config.spinCount;
  Backoff backoff(spins);
  // When the plans last moved, for timeouts and stall reports: read from the
  // clock only once a wait is past spinning (a call that never waits that
  // long never reads it), as the time of the progress before that wait; it
  // is off by at most one spin phase.
  Clock::time_point lastProgress{}, lastCheck{};
  bool progressUnstamped = true;  // the start counts as progress
  StallWatch stalls;
  std::vector<IdleState> idleState;
  constexpr int kPiecesPerVisit = 16;  // fairness between lanes
  for (;;) {
    bool pending = false, progressed = false;
    ncclResult_t err = ncclSuccess;
    for (Plan* p : plans) {
      bool planPending = false;
      for (Lane& lane : p->lanes) {
        for (int i = 0; i < kPiecesPerVisit && progressLane(*p, lane, &err); ++i) progressed = true;
        if (err != ncclSuccess) {
          markFailed(plans, err);
          return err;
        }
        planPending |= !lane.finished();
      }
      pending |= planPending;
      // A finished plan says so at once: its senders may be among the plans
      // this loop drives, and a scatter's receivers mark before they wait
      // for their root, which waits for their marks.
      if (!planPending && !p->finishesWithLanes && sendsTaken(*p)) markPlanDone(*p);
    }
    if (progressed) backoff.progressed();  // also when it finished the work: that wait taught something too
    if (!pending && allSettled(plans)) {
      host::streamFence();
      markDone(plans);
      return ncclSuccess;
    }
    if (progressed) {
      progressUnstamped = true;
      continue;
    }
    backoff.wait(plans);
    if (!backoff.pastSpinning()) continue;
    const auto now = Clock::now();
    if (progressUnstamped) {
      if (lastCheck == Clock::time_point{}) lastCheck = now;  // the first check comes 50 ms into the first wait
      lastProgress = now;
      progressUnstamped = false;
    }
    if (now - lastCheck < std::chrono::milliseconds(50)) continue;
    lastCheck = now;
    ncclResult_t res = idleChecks(plans, lastProgress, idleState, &stalls);
    if (res != ncclSuccess) {
      markFailed(plans, res);
      return res;
    }
  }
}

}  // namespace chorus
