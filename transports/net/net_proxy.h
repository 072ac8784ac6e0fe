// The network proxy: one thread per process, shared by every communicator,
// that moves connector slots between local FIFOs and network backends.
//
// It runs only while links exist (started by the first attach, it exits when
// the last link is closed) and it never spins on an idle process:
//  - nothing in flight: it sleeps on a condition variable until a doorbell
//    (SendConnector::post / RecvConnector::release ring it) or a new link;
//  - requests in flight but nothing moving: it polls with sleeps that grow
//    with the idle time up to CHORUS_NET_POLL_MAX_US, cut short by doorbells.
// The proxy of a forked child is a fresh one (the parent's thread does not
// exist there); the parent's links are left alone in the child.
//
// Lifetime: a communicator's destroy waits (awaitRetired) until the proxy has
// closed the links it dropped, and at process exit an atexit handler closes
// every link and joins the thread (stopAtExit), both bounded, so no backend
// call runs while static destructors and library destructors (libucp's) run.
#pragma once

#include <poll.h>
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "transport/fifo.h"
#include "transports/net/net_link.h"

namespace chorus {

// How long the proxy sleeps while some link's executor is present (it moves
// that link itself): `*grown` (500 us after a kick, where executors share
// cores, or once no executor was present), which then doubles up to 4 ms
// for the next such sleep (net_proxy.cc: kExecutorPresent,
// kExecutorPresentMaxWait).
std::chrono::microseconds nextPresentWait(std::chrono::microseconds* grown, bool kicked, bool coresShared);

class NetProxy {
 public:
  static NetProxy& forThisProcess();
  // This process's proxy if it has one (creates none).
  static NetProxy* existing();

  // Hands a set-up link (receiver: listening; sender: connected) to the
  // proxy thread and returns the end the executor uses. When the last copy
  // of that end is dropped the link is retired and closed by the proxy.
  FifoEnd attach(std::shared_ptr<NetLink> link, int peerRank, int peerPid);

  // Waits until every link retired before the call has been closed by the
  // proxy thread, at most `bound`. False (after a WARN) when some were not.
  bool awaitRetired(std::chrono::milliseconds bound);
  // Process exit: retires every link (senders drain for at most `drain`),
  // waits at most `bound` for the thread to close them and end, joins it.
  // Links attached afterwards are never served. False when it timed out.
  bool stopAtExit(std::chrono::milliseconds drain, std::chrono::milliseconds bound);

  // CPU time the proxy thread has used; false when it is not running (tests).
  bool threadCpuNs(uint64_t* ns);
  // Links the proxy thread currently serves (tests).
  size_t linkCount();
  // Progress passes over the links so far: how often the proxy polled (tests).
  uint64_t passCount() const { return passes_.load(std::memory_order_relaxed); }
  // Slots the proxy thread itself moved so far (a sender's isends posted, a
  // receiver's receives landed), as against those the executors moved inline
  // (tests).
  uint64_t slotMoveCount() const { return slotMoves_.load(std::memory_order_relaxed); }
  // Wakes the proxy if it sleeps (any thread; net_wake.h).
  // Counted: a pass after a kick steps every link, also those whose
  // executor is present (a helper thread finished a part of a large
  // message, or an executor handed work over).
  void kick() {
    kicks_.fetch_add(1, std::memory_order_release);
    bell_.ring();
  }

 private:
  struct Bell : Doorbell {
    NetProxy* owner = nullptr;
  };
  NetProxy();
  static void onRing(Doorbell* bell);
  void wake();
  void signal();  // after woken_ was set: wakes the thread from its cv or poll
  void waitForWork(std::chrono::microseconds limit, std::vector<std::shared_ptr<NetLink>>& links);
  void retire(NetLink* link);
  void startThread();
  void run();
  void applyStop(std::vector<std::shared_ptr<NetLink>>& links);
  void failAll(std::vector<std::shared_ptr<NetLink>>& links, ncclResult_t res);
  bool pass(std::vector<std::shared_ptr<NetLink>>& links, bool* busy);
  void sleep(std::chrono::microseconds limit, std::vector<std::shared_ptr<NetLink>>& links);

  pid_t pid_;
  std::mutex mu_;
  std::condition_variable cv_;      // wakes the proxy thread
  std::condition_variable doneCv_;  // a link was closed or the thread ended
  bool woken_ = false;
  bool running_ = false;
  bool stopping_ = false;  // process exit: close everything, start no thread
  std::chrono::steady_clock::time_point stopDrainDeadline_{};
  std::vector<std::shared_ptr<NetLink>> incoming_;
  size_t linkCount_ = 0;
  uint64_t lastLinkId_ = 0;
  std::set<uint64_t> retiredOpen_;  // links retired and not closed yet
  std::mutex threadMu_;             // guards thread_
  std::thread thread_;              // the running (or last) proxy thread
  bool haveClock_ = false;
  clockid_t cpuClock_{};
  Bell bell_;
  int wakeFd_ = -1;  // eventfd the thread polls with the links' descriptors; -1: the cv only
  std::vector<pollfd> pollFds_;
  std::atomic<uint64_t> passes_{0};
  std::atomic<uint64_t> slotMoves_{0};
  std::atomic<uint64_t> kicks_{0};
  uint64_t kicksSeen_ = 0;  // proxy thread: kicks_ at its last pass
  bool allInline_ = false;  // proxy thread: every link of its list moves inline
  // Proxy thread: how long its next sleep lasts while executors are present
  // (net_proxy.cc, kExecutorPresent doubling up to kExecutorPresentMaxWait).
  std::chrono::microseconds presentWait_{};
  bool kickedLastPass_ = false;  // proxy thread: its last pass followed a kick
};

}  // namespace chorus
