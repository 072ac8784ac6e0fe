#include "transports/net/net_proxy.h"

#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/exception_guard.h"
#include "core/log.h"
#include "core/params.h"
#include "core/result.h"
#include "core/wait_limit.h"
#include "gpu/gpu_runtime.h"
#include "transports/net/net_link_side.h"
#include "transports/net/net_wake.h"

namespace chorus {
namespace {

using ProxyClock = std::chrono::steady_clock;

// At process exit, senders get at most this long to hand over what the
// executor already posted (after ncclCommDestroy's finalize there is nothing).
constexpr std::chrono::milliseconds kExitDrain(1000);

// Proxies by process: a forked child must not use the parent's (its thread is
// gone and its locks may be held), so the slot is re-filled per pid.
struct ProxySlot {
  std::mutex mu;
  pid_t owner = 0;
  NetProxy* proxy = nullptr;
  bool exitHookRegistered = false;  // inherited by forked children, as the hook is
};

ProxySlot& proxySlot() {
  static ProxySlot* slot = [] {
    auto* s = new ProxySlot;
    pthread_atfork([] { proxySlot().mu.lock(); }, [] { proxySlot().mu.unlock(); }, [] { proxySlot().mu.unlock(); });
    return s;
  }();
  return *slot;
}

// atexit handler: closes this process's links and ends its proxy thread before
// static destructors and the backends' library destructors (libucp's) run.
// It is registered when the first proxy is made, after the backends were
// loaded and initialized, so it runs before their teardown.
void stopProxyAtExit() {
  NetProxy* proxy = NetProxy::existing();
  if (proxy == nullptr) return;
  proxy->stopAtExit(kExitDrain, std::chrono::milliseconds(kCloseDrainMs));
}

// With every busy link waiting on descriptors, the timer is only a safety net.
constexpr std::chrono::milliseconds kFdWaitSafety(100);
// While traffic is recent (short timed sleeps, idle < ~1 ms) the proxy keeps
// polling on the timer: on a loaded machine a thread that is woken per
// message by the kernel waits for the scheduler each time, which measured
// slower than short sleeps. After that it blocks on the descriptors.
constexpr std::chrono::microseconds kFdWaitAfter(64);
// Links whose executors move them inline (net_link_inline.cc) need the proxy
// only as a backstop: it sleeps on descriptors at once, and leaves out the
// links an executor stepped within this window (it is there to take what
// arrives; waking for it too would only take a core from it).
constexpr std::chrono::microseconds kExecutorPresent(500);
// While executors stay present the proxy looks again after kExecutorPresent,
// then after twice as long each time they still are, up to this: each look
// wakes the proxy on a core an executor runs on, and preempts it (on a
// 2-core machine, about one wake per 1 MiB all-reduce cost 20-40% of its
// rate). A hand-over still wakes the proxy at once (a kick), and the look
// after it comes after kExecutorPresent again (links being set up hand over
// at every step until the proxy has finished with them); only an executor
// that stops stepping without handing over waits longer for it. Where the
// ranks outnumber the CPUs (NetLink::coresShared) executors are off their
// cores often, and the proxy that takes over then is what keeps data moving
// (2 x 2 on two cores lost a third of its rate at 16 MiB): it looks every
// kExecutorPresent there.
constexpr std::chrono::microseconds kExecutorPresentMaxWait(4000);

}  // namespace

std::chrono::microseconds nextPresentWait(std::chrono::microseconds* grown, bool kicked, bool coresShared) {
  if (kicked || coresShared) *grown = kExecutorPresent;
  const std::chrono::microseconds wait = *grown;
  if (!coresShared) *grown = std::min(2 * wait, kExecutorPresentMaxWait);
  return wait;
}

namespace {

// Whose turn a link is: the proxy's (`lock` now holds the link), its
// executor's (it moves the link inline and is there, or holds the lock), or,
// when the proxy is about to sleep, nobody's: an executor handed work over.
enum class LinkTurn { Proxy, Executor, HandedOver };

// A link its executor moves inline is left to it while the executor is there
// (unless it handed work over) and skipped while the executor holds it, so
// the two never queue on the lock; every other link is simply locked. A pass
// takes the hand-over (`forPass`); a sleep only looks at it.
LinkTurn takeTurn(NetLink& l, int64_t presentSince, std::unique_lock<std::mutex>& lock, bool forPass) {
  if (!l.movesInline()) {
    lock.lock();
    return LinkTurn::Proxy;
  }
  const bool wanted = forPass ? l.proxyWanted.exchange(false, std::memory_order_acq_rel)
                              : l.proxyWanted.load(std::memory_order_acquire);
  if (wanted && !forPass) return LinkTurn::HandedOver;
  if (!wanted && !l.retired.load(std::memory_order_acquire) && l.executorPresent(presentSince)) {
    return LinkTurn::Executor;
  }
  if (lock.try_lock()) return LinkTurn::Proxy;
  if (wanted) l.proxyWanted.store(true, std::memory_order_release);
  return LinkTurn::Executor;
}

bool allMovedInline(const std::vector<std::shared_ptr<NetLink>>& links) {
  return std::all_of(links.begin(), links.end(), [](const auto& l) { return l->movesInline(); });
}

// `limit`, or less when a receiver link whose executor is not there (since
// `presentSince`) holds back an ack that is due sooner.
std::chrono::microseconds untilAckDue(std::chrono::microseconds limit,
                                      const std::vector<std::shared_ptr<NetLink>>& links, int64_t presentSince) {
  const int64_t due = earliestAckDue(links, presentSince);
  if (due == INT64_MAX) return limit;
  const auto left = std::chrono::microseconds(std::max<int64_t>(0, (due - NetLink::nowNs()) / 1000 + 1));
  return std::min(limit, left);
}

std::atomic<NetProxy*> g_kickable{nullptr};

}  // namespace

void netProxyKick() {
  NetProxy* p = g_kickable.load(std::memory_order_acquire);
  if (p != nullptr) p->kick();
}

NetProxy::NetProxy() : pid_(getpid()), presentWait_(kExecutorPresent) {
  bell_.owner = this;
  bell_.wake = &NetProxy::onRing;
  wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  g_kickable.store(this, std::memory_order_release);
}

NetProxy& NetProxy::forThisProcess() {
  ProxySlot& s = proxySlot();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.owner != getpid()) {
    // Never deleted: links and the thread refer to it until exit; a parent's
    // proxy inherited by a child is simply abandoned.
    s.proxy = new NetProxy();
    s.owner = getpid();
    if (!s.exitHookRegistered) s.exitHookRegistered = atexit(stopProxyAtExit) == 0;
  }
  return *s.proxy;
}

NetProxy* NetProxy::existing() {
  ProxySlot& s = proxySlot();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.owner == getpid() ? s.proxy : nullptr;
}

void NetProxy::onRing(Doorbell* bell) { static_cast<Bell*>(bell)->owner->wake(); }

void NetProxy::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  signal();
}

void NetProxy::signal() {
  cv_.notify_one();
  if (wakeFd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wakeFd_, &one, sizeof(one));
  }
}

FifoEnd NetProxy::attach(std::shared_ptr<NetLink> link, int peerRank, int peerPid) {
  FifoEnd end;
  end.ctl = link->ctl;
  end.slots = link->slots;
  end.slotBytes = link->slotBytes;
  end.nslots = link->nslots;
  end.slotStride = link->stride();
  end.takenCounter = link->framed();
  end.peer = peerRank;
  end.peerPid = peerPid;
  end.health = link->health;
  end.doorbell = &bell_;
  if (enableInlineMoves(*link)) end.mover = &link->mover;
  // User memory needs the executor's hand on the link when an operation
  // fails (InlineMover::dropUserMemory).
  end.sendsUserMemory = link->sender && link->framed() && link->gatherSend != nullptr && end.mover != nullptr;
  if (!link->sender && link->framed() && end.mover != nullptr) end.landings = link->landings.get();
  const pid_t pid = pid_;
  NetLink* raw = link.get();
  // The executor's handle on the link: when its last copy goes, the link retires.
  end.memory = std::shared_ptr<void>(raw, [this, pid, keep = link](void*) {
    if (getpid() == pid) retire(keep.get());
  });
  bool start = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    link->id = ++lastLinkId_;
    incoming_.push_back(std::move(link));
    ++linkCount_;
    woken_ = true;
    start = !running_ && !stopping_;  // after the exit hook ran no thread serves links
    running_ = running_ || start;
  }
  signal();
  if (start) startThread();
  return end;
}

// The previous thread (if any) announced its end before this start was
// decided, so joining it takes no longer than its return.
void NetProxy::startThread() {
  std::thread previous;
  {
    std::lock_guard<std::mutex> lock(threadMu_);
    previous = std::move(thread_);
    thread_ = std::thread([this] { run(); });
  }
  if (previous.joinable()) previous.join();
}

void NetProxy::retire(NetLink* link) {
  link->retired.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!link->closed) retiredOpen_.insert(link->id);
    woken_ = true;
  }
  signal();
}

bool NetProxy::awaitRetired(std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(mu_);
  if (getpid() != pid_ || retiredOpen_.empty()) return true;
  const std::vector<uint64_t> waitFor(retiredOpen_.begin(), retiredOpen_.end());
  auto openCount = [&] {
    return std::count_if(waitFor.begin(), waitFor.end(), [&](uint64_t id) { return retiredOpen_.count(id) != 0; });
  };
  // Without a thread (only after the exit hook) nothing would close them.
  const auto start = ProxyClock::now();
  if (doneCv_.wait_for(lock, bound, [&] { return openCount() == 0 || !running_; }) && openCount() == 0) {
    CHORUS_INFO(kLogNet | kLogProxy, "net proxy: %zu retired link(s) closed after %lld us", waitFor.size(),
                (long long)std::chrono::duration_cast<std::chrono::microseconds>(ProxyClock::now() - start).count());
    return true;
  }
  CHORUS_WARN(kLogNet, "net proxy: %lld retired link(s) not closed within %lld ms; they are closed in the background",
              (long long)openCount(), (long long)bound.count());
  return false;
}

bool NetProxy::stopAtExit(std::chrono::milliseconds drain, std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(mu_);
  if (getpid() != pid_) return true;
  stopping_ = true;
  stopDrainDeadline_ = ProxyClock::now() + drain;
  woken_ = true;
  signal();
  {
    std::lock_guard<std::mutex> threadLock(threadMu_);
    if (thread_.get_id() == std::this_thread::get_id()) return false;  // exit() called by the proxy thread itself
  }
  if (!doneCv_.wait_for(lock, bound, [this] { return !running_; })) {
    CHORUS_WARN(kLogNet, "net proxy: %zu link(s) still open %lld ms after exit began; leaving the proxy thread running",
                linkCount_, (long long)bound.count());
    return false;
  }
  lock.unlock();
  std::thread finished;
  {
    std::lock_guard<std::mutex> threadLock(threadMu_);
    finished = std::move(thread_);
  }
  if (finished.joinable()) finished.join();
  return true;
}

size_t NetProxy::linkCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return linkCount_;
}

bool NetProxy::threadCpuNs(uint64_t* ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_ || !haveClock_) return false;
  timespec ts{};
  if (clock_gettime(cpuClock_, &ts) != 0) return false;
  *ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return true;
}

// Process exit: every link is retired, whether or not its end still exists
// (an executor still waiting on it is told why), and senders drain briefly.
void NetProxy::applyStop(std::vector<std::shared_ptr<NetLink>>& links) {
  ProxyClock::time_point drainDeadline;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drainDeadline = stopDrainDeadline_;
  }
  for (auto& l : links) {
    if (!l->retired.exchange(true, std::memory_order_acq_rel))
      l->health->setFailed(ncclSystemError, (l->label + ": the process is exiting").c_str());
    std::lock_guard<std::mutex> linkLock(l->moveMu);
    hurryDrain(*l, drainDeadline);
  }
}

// An exception escaped a pass (core/exception_guard.h): every link fails
// with its message, so whoever waits on one gets an error naming the peer,
// and is not moved again; its owner retires it as after any link failure.
void NetProxy::failAll(std::vector<std::shared_ptr<NetLink>>& links, ncclResult_t res) {
  const std::string why = lastErrorMessage();
  for (auto& l : links) {
    std::lock_guard<std::mutex> lock(l->moveMu);
    l->failed = true;
    l->health->setFailed(res, (l->label + ": " + why).c_str());
  }
}

// One progress pass over all links; closes retired ones. True if anything moved.
bool NetProxy::pass(std::vector<std::shared_ptr<NetLink>>& links, bool* busy) {
  passes_.fetch_add(1, std::memory_order_relaxed);
  bool progressed = false;
  const uint64_t kicks = kicks_.load(std::memory_order_acquire);
  const bool kicked = kicks != kicksSeen_;
  kicksSeen_ = kicks;
  kickedLastPass_ = kicked;
  // After a kick nobody counts as present: whatever was handed over is taken.
  const int64_t presentSince =
      kicked ? INT64_MAX : NetLink::nowNs() - std::chrono::nanoseconds(kExecutorPresent).count();
  for (size_t i = 0; i < links.size();) {
    NetLink& l = *links[i];
    std::unique_lock<std::mutex> linkLock(l.moveMu, std::defer_lock);
    if (takeTurn(l, presentSince, linkLock, /*forPass=*/true) != LinkTurn::Proxy) {
      *busy = true;  // its executor moves it; look again soon
      ++i;
      continue;
    }
    const uint64_t movedBefore = l.sender ? l.posted : l.completed;
    stepLink(l, &progressed, busy);
    slotMoves_.fetch_add((l.sender ? l.posted : l.completed) - movedBefore, std::memory_order_relaxed);
    if (!l.retired.load(std::memory_order_acquire)) {
      ++i;
      continue;
    }
    if (!linkClosable(l)) {
      *busy = true;  // draining: poll until done or the deadline
      ++i;
      continue;
    }
    closeLink(l);
    l.movable = false;
    linkLock.unlock();
    {
      std::lock_guard<std::mutex> lock(mu_);
      l.closed = true;
      retiredOpen_.erase(l.id);
      --linkCount_;
    }
    doneCv_.notify_all();
    links.erase(links.begin() + static_cast<ptrdiff_t>(i));  // may free l
    allInline_ = allMovedInline(links);
    progressed = true;
  }
  return progressed;
}

// Sleeps until a doorbell, a new link or `limit`. The doorbell protocol: we
// announce sleeping, then look once more (a ring that came before our
// announcement is seen by this pass; one after it sees `sleeping` and wakes us).
void NetProxy::sleep(std::chrono::microseconds limit, std::vector<std::shared_ptr<NetLink>>& links) {
  bell_.sleeping.store(true, std::memory_order_seq_cst);
  bool busy = false;
  if (pass(links, &busy)) {
    bell_.sleeping.store(false, std::memory_order_relaxed);
    return;
  }
  waitForWork(limit, links);
  bell_.sleeping.store(false, std::memory_order_relaxed);
}

// Sleeps on the wake eventfd and the links' descriptors when every link can
// be waited on that way (then `limit` only matters as a safety net), else on
// the condition variable for `limit`.
void NetProxy::waitForWork(std::chrono::microseconds limit, std::vector<std::shared_ptr<NetLink>>& links) {
  bool allFds = wakeFd_ >= 0 && (limit >= kFdWaitAfter || allInline_);
  bool present = false, coresShared = false;
  const int64_t presentSince = NetLink::nowNs() - std::chrono::nanoseconds(kExecutorPresent).count();
  pollFds_.clear();
  if (allFds) pollFds_.push_back(pollfd{wakeFd_, POLLIN, 0});
  for (size_t i = 0; i < links.size() && allFds; ++i) {
    NetLink& l = *links[i];
    // A link its executor is moving adds no descriptors: that executor takes
    // what arrives, and the proxy looks again after presentWait_.
    std::unique_lock<std::mutex> linkLock(l.moveMu, std::defer_lock);
    const LinkTurn turn = takeTurn(l, presentSince, linkLock, /*forPass=*/false);
    if (turn == LinkTurn::HandedOver) return;  // work to do: no sleep
    if (turn == LinkTurn::Executor) {
      present = true;
      coresShared = coresShared || l.coresShared;
      continue;
    }
    allFds = linkPollFds(l, &pollFds_);
  }
  // A held-back ack that falls due wakes the proxy, unless its link's
  // executor is present: it sends its own (waking for it would only spin).
  // The links of an executor that moved on to other links (an idle ring
  // after a setup call) still get theirs on time.
  const std::chrono::microseconds ackLimit = untilAckDue(kFdWaitSafety, links, present ? presentSince : INT64_MAX);
  if (!allFds) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::min(limit, ackLimit), [this] { return woken_; });
    woken_ = false;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (woken_) {
      woken_ = false;
      return;
    }
  }
  if (!present) presentWait_ = kExecutorPresent;
  const auto wait = present ? std::min(nextPresentWait(&presentWait_, kickedLastPass_, coresShared), ackLimit)
                            : std::min(std::max<std::chrono::microseconds>(limit, kFdWaitSafety), ackLimit);
  const timespec ts{static_cast<time_t>(wait.count() / 1000000), static_cast<long>(wait.count() % 1000000) * 1000};
  (void)ppoll(pollFds_.data(), pollFds_.size(), &ts, nullptr);
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = read(wakeFd_, &count, sizeof(count));
  std::lock_guard<std::mutex> lock(mu_);
  woken_ = false;
}

void NetProxy::run() {
  gpu::declareKernelsWaitOnThisThread();  // the device slots of links it drops are freed by the GPU watchdog
  {
    std::lock_guard<std::mutex> lock(mu_);
    haveClock_ = pthread_getcpuclockid(pthread_self(), &cpuClock_) == 0;
  }
  const auto maxPoll = std::chrono::microseconds(std::max<int64_t>(20, params::netPollMaxUs()));
  std::vector<std::shared_ptr<NetLink>> links;
  auto lastMove = ProxyClock::now();
  for (;;) {
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& l : incoming_) links.push_back(std::move(l));
      if (!incoming_.empty()) allInline_ = allMovedInline(links);
      incoming_.clear();
      stop = stopping_;
      if (links.empty()) {
        running_ = false;  // the next attach starts a new thread (and joins this one)
        haveClock_ = false;
        doneCv_.notify_all();
        return;
      }
    }
    bool busy = false, moved = false;
    const ncclResult_t res = guardedRun("net proxy thread", [&] {
      if (stop) applyStop(links);
      moved = pass(links, &busy);
    });
    if (res != ncclSuccess) failAll(links, res);
    if (moved) {
      presentWait_ = kExecutorPresent;
      lastMove = ProxyClock::now();
      continue;
    }
    const auto idle = std::chrono::duration_cast<std::chrono::microseconds>(ProxyClock::now() - lastMove);
    if (busy && idle < std::chrono::microseconds(50) && !allInline_) {
      std::this_thread::yield();  // traffic is likely to resume within microseconds
      continue;
    }
    // Requests in flight: bounded poll that backs off with the idle time.
    // Nothing in flight: only a doorbell or a new link can create work.
    const auto limit = busy ? std::clamp(idle / 16, std::chrono::microseconds(20), maxPoll)
                            : std::chrono::microseconds(std::chrono::seconds(10));
    sleep(limit, links);
  }
}

}  // namespace chorus
