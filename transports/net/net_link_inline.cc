// Inline moves: the executor's thread steps its own network link when it
// posts a slot, releases one, or finds nothing to take (FifoEnd::mover).
// A small message then leaves in the executor's sendmsg and is picked up
// by the waiting executor's recv, with no hand-over to the proxy thread
// and back; on a machine whose cores are shared those two wake-ups were
// most of a small all-reduce's time. The proxy thread still serves every
// link (what the executor leaves: large messages in flight, acks arriving
// while it computes, links of ranks that returned to the application) and
// is woken only when a step leaves work that it would not see otherwise.
#include <chrono>
#include <string>

#include "core/exception_guard.h"
#include "core/params.h"
#include "core/result.h"
#include "transports/net/net_link.h"
#include "transports/net/net_wake.h"

namespace chorus {
namespace {

void handToProxy(NetLink& link) {
  link.proxyWanted.store(true, std::memory_order_release);
  netProxyKick();
}

// What an inline step leaves that the proxy must look at now: the proxy may
// be asleep on descriptors chosen before this step, or on a timer.
bool proxyMustLook(const NetLink& link, bool hadReceives) {
  if (link.failed || link.verdictSeen) return false;
  if (link.sender) {
    const uint64_t tail = link.ctl->tail.load(std::memory_order_acquire);
    return fifo::slotPublished(link.posted, tail) || link.completed < link.posted || link.helloReq != nullptr ||
           link.revListen != nullptr || link.verdictReq != nullptr;
  }
  return (!hadReceives && link.completed < link.posted) || link.ackReq != nullptr || !link.helloDone ||
         (link.revComm == nullptr && !link.reverseGone);
}

// A step on the executor's thread must not leave its own error message behind
// (the last error is per thread: it is the application's ncclGetLastError).
bool stepInline(NetLink& link, bool waiting) {
  const bool hadError = lastErrorMessage()[0] != '\0';
  const std::string saved = hadError ? std::string(lastErrorMessage()) : std::string();
  const bool hadReceives = link.completed < link.posted;
  bool progressed = false, busy = false;
  link.inlineStep = true;
  // A release behind receives still pending (the executor looked and found
  // nothing) has no reason to look again; one that re-opens a full FIFO
  // does: the sender is ahead, and its next message is likely waiting.
  link.publishOnly = !waiting && hadReceives;
  const ncclResult_t res = guardedRun("net inline move", [&] { stepLink(link, &progressed, &busy); });
  link.inlineStep = false;
  link.publishOnly = false;
  if (res != ncclSuccess) {
    link.failed = true;
    link.health->setFailed(res, (link.label + ": " + lastErrorMessage()).c_str());
  }
  if (proxyMustLook(link, hadReceives)) handToProxy(link);
  if (hadError || lastErrorMessage()[0] != '\0') restoreLastError(saved);
  return progressed;
}

bool moveInline(InlineMover* m, bool waiting) {
  NetLink& link = *static_cast<NetLink::Mover*>(m)->link;
  std::unique_lock<std::mutex> lock(link.moveMu, std::try_to_lock);
  if (!lock.owns_lock()) {
    handToProxy(link);  // the proxy is stepping it: make sure it looks once more
    return false;
  }
  if (!link.movable || link.failed) return false;
  link.inlineAtNs.store(NetLink::nowNs(), std::memory_order_relaxed);
  return stepInline(link, waiting);
}

void stopLink(NetLink& link, uint64_t unfinished) {
  link.failed = true;
  link.health->setFailed(ncclRemoteError,
                         (link.label + ": stopped: the operation using the application's buffer failed").c_str());
  CHORUS_INFO(kLogNet | kLogProxy,
              "net: %s: operation failed with %llu slot(s) of user memory unfinished: link stopped", link.label.c_str(),
              (unsigned long long)unfinished);
}

// The executor's operation failed and may free its buffers once the call
// returns (the communicator is failed already): a sender still holding
// user-memory slots it has not finished sending stops for good; a receiver
// lands nothing more, and one whose receive is writing into user memory
// right now stops.
void dropUserMemory(InlineMover* m) {
  NetLink& link = *static_cast<NetLink::Mover*>(m)->link;
  std::lock_guard<std::mutex> lock(link.moveMu);
  if (!link.movable || link.failed) return;
  if (!link.sender) {
    link.landingsDropped = true;
    for (uint64_t i = link.completed; i < link.posted; ++i)
      if (link.landedInUser[i % link.nslots]) return stopLink(link, link.posted - link.completed);
    return;
  }
  const uint64_t tail = link.ctl->tail.load(std::memory_order_acquire);
  for (uint64_t i = link.completed; i < tail; ++i)
    if (link.ctl->sizes[i % link.nslots] == kUserMemorySlotMarker) return stopLink(link, tail - link.completed);
}

// Requests in flight on the link's connection that its descriptor does not
// cover: a socket connection's helper threads move a large message's parts
// on data streams and wake only the proxy, so a thread asleep on the
// control stream would miss them.
bool movedByOthers(const NetLink& link) {
  if (link.completed >= link.posted || link.comm == nullptr) return false;
  const NetPollFdFn fn = netPollFdFor(link.net);
  int fd = -1;
  short events = 0;
  return fn == nullptr || !fn(link.comm, &fd, &events) || fd < 0;
}

// Before a waiting executor sleeps on the link's descriptors: one more step
// (what arrived since its last look is taken now, not after the sleep; acks
// too, which an inline step otherwise reads at most every 100 us: one that
// arrived would make the sleep return at once until then), then the
// descriptors, only if that step moved nothing. The executor counts as
// present on the link for the whole sleep (inlineAtNs ahead of the clock):
// a proxy that took what arrives would leave it asleep until the bound.
bool pollFdsInline(InlineMover* m, std::vector<pollfd>* fds, int64_t sleepNs) {
  NetLink& link = *static_cast<NetLink::Mover*>(m)->link;
  std::unique_lock<std::mutex> lock(link.moveMu, std::try_to_lock);
  if (!lock.owns_lock() || !link.movable || link.failed) return false;
  link.inlineAtNs.store(NetLink::nowNs() + sleepNs, std::memory_order_relaxed);
  link.ackPolledNs = 0;
  if (stepInline(link, true) || movedByOthers(link)) return false;
  return linkPollFds(link, fds);
}

}  // namespace

bool enableInlineMoves(NetLink& link) {
  if (link.kernelDriven || !params::netInline() || !netInlineMovesFor(link.net)) return false;
  link.mover.move = &moveInline;
  link.mover.dropUserMemory = &dropUserMemory;
  link.mover.pollFds = &pollFdsInline;
  link.mover.link = &link;
  return true;
}

}  // namespace chorus
