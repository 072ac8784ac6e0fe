// Per-link progress of the proxy thread. A backend error marks the link
// failed and records code + message in its LinkHealth, which the executor
// turns into an error naming the peer the next time it waits on it.
#include "transports/net/net_link.h"

#include <algorithm>
#include <string>

#include "core/result.h"
#include "core/wait_limit.h"

namespace chorus {
namespace {

// Records a failed backend call on the link; the link is not touched again.
void markFailed(NetLink& link, const char* what, ncclResult_t res) {
  std::string msg = std::string(link.label) + ": " + link.net->name + " " + what + " failed: " + lastErrorMessage();
  link.failed = true;
  link.health->setFailed(res, msg.c_str());
  CHORUS_INFO(kLogNet | kLogProxy, "net proxy: %s", msg.c_str());
}

bool call(NetLink& link, const char* what, ncclResult_t res) {
  if (res == ncclSuccess) return true;
  markFailed(link, what, res);
  return false;
}

void stepAccept(NetLink& link, bool* progressed) {
  clearLastError();
  if (!call(link, "accept", link.net->accept(link.listenComm, &link.comm)) || link.comm == nullptr) return;
  *progressed = true;
  link.net->closeListen(link.listenComm);
  link.listenComm = nullptr;
  call(link, "regMr",
       link.net->regMr(link.comm, link.slots, static_cast<size_t>(link.slotBytes) * link.nslots, CHORUS_NET_PTR_HOST,
                       &link.mhandle));
}

void stepSend(NetLink& link, bool* progressed) {
  const uint64_t tail = link.ctl->tail.load(std::memory_order_acquire);
  while (link.posted < tail) {
    const uint64_t i = link.posted;
    void* req = nullptr;
    if (!call(link, "isend",
              link.net->isend(link.comm, link.slot(i), link.ctl->sizes[i % link.nslots], 0, link.mhandle, &req)))
      return;
    if (req == nullptr) break;
    link.requests[i % link.nslots] = req;
    ++link.posted;
    *progressed = true;
  }
  while (link.completed < link.posted) {
    int done = 0;
    size_t bytes = 0;
    if (!call(link, "test(isend)", link.net->test(link.requests[link.completed % link.nslots], &done, &bytes))) return;
    if (!done) break;
    link.requests[link.completed % link.nslots] = nullptr;
    link.ctl->head.store(++link.completed, std::memory_order_release);
    *progressed = true;
  }
}

void stepRecv(NetLink& link, bool* progressed) {
  const uint64_t head = link.ctl->head.load(std::memory_order_acquire);
  while (link.posted - head < link.nslots) {
    const uint64_t i = link.posted;
    void* req = nullptr;
    if (!call(link, "irecv", link.net->irecv(link.comm, link.slot(i), link.slotBytes, 0, link.mhandle, &req))) return;
    if (req == nullptr) break;
    link.requests[i % link.nslots] = req;
    ++link.posted;
    *progressed = true;
  }
  while (link.completed < link.posted) {
    int done = 0;
    size_t bytes = 0;
    if (!call(link, "test(irecv)", link.net->test(link.requests[link.completed % link.nslots], &done, &bytes))) return;
    if (!done) break;
    link.requests[link.completed % link.nslots] = nullptr;
    link.ctl->sizes[link.completed % link.nslots] = static_cast<uint32_t>(bytes);
    link.ctl->tail.store(++link.completed, std::memory_order_release);
    *progressed = true;
  }
}

}  // namespace

void stepLink(NetLink& link, bool* progressed, bool* busy) {
  if (link.failed) return;
  if (link.comm == nullptr) {
    stepAccept(link, progressed);
    *busy = *busy || !link.failed;
    if (link.comm == nullptr || link.failed) return;
  }
  if (link.sender) {
    stepSend(link, progressed);
  } else {
    stepRecv(link, progressed);
  }
  if (!link.failed && (link.completed < link.posted || link.kernelDriven)) *busy = true;
}

bool linkClosable(NetLink& link) {
  if (!link.sender || link.failed || link.comm == nullptr) return true;
  const auto now = std::chrono::steady_clock::now();
  if (!link.draining) {
    link.draining = true;
    // After a finalize the peers took everything; otherwise (error, abort)
    // give the peer a bounded moment to take what was posted.
    const int64_t ms = link.waitLimitMs > 0 ? std::min(link.waitLimitMs, kCloseDrainMs) : kCloseDrainMs;
    link.drainDeadline = deadlineAfterMs(ms, now);
  }
  const bool drained = link.completed == link.ctl->tail.load(std::memory_order_acquire);
  if (!drained && now >= link.drainDeadline)
    CHORUS_WARN(kLogNet, "net proxy: %s: closing with %llu unsent slot(s): the peer did not take them in time",
                link.label.c_str(), (unsigned long long)(link.ctl->tail.load() - link.completed));
  return drained || now >= link.drainDeadline;
}

void hurryDrain(NetLink& link, std::chrono::steady_clock::time_point deadline) {
  if (!link.draining || link.drainDeadline > deadline) link.drainDeadline = deadline;
  link.draining = true;
}

void closeLink(NetLink& link) {
  if (link.comm != nullptr && link.mhandle != nullptr) link.net->deregMr(link.comm, link.mhandle);
  if (link.comm != nullptr) (link.sender ? link.net->closeSend : link.net->closeRecv)(link.comm);
  if (link.listenComm != nullptr) link.net->closeListen(link.listenComm);
  link.comm = link.listenComm = link.mhandle = nullptr;
}

}  // namespace chorus
