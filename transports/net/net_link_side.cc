// The framed link's side traffic (transports/net/net_wire.h). The reverse
// connection is set up by the sender: it listens on its own device, sends
// the handle as the first message on the forward connection, and accepts
// the receiver's connection. A reverse connection that closes or breaks is
// not an error by itself (the peer finished, or the forward connection
// reports the failure): the sender then frees slots once they are sent, as
// without acks.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/log.h"
#include "core/result.h"
#include "transports/net/net_link_side.h"

namespace chorus {
namespace {

using netwire::Ack;
using netwire::Kind;
using netwire::SlotHeader;

// Without acks the sender takes its slots and the receiver's completion as
// given once they are sent (as before the reverse connection existed).
void reverseGone(NetLink& link, const char* what) {
  if (link.reverseGone) return;
  link.reverseGone = true;
  if (link.sender) link.ctl->doneSeq.store(UINT64_MAX, std::memory_order_release);
  CHORUS_INFO(kLogNet | kLogProxy, "net proxy: %s: reverse connection %s: %s", link.label.c_str(), what,
              lastErrorMessage());
}

}  // namespace

bool sideDone(NetLink& link, void** req, const char* what, SideGone gone, size_t* bytes) {
  int done = 0;
  size_t size = 0;
  const ncclResult_t res = link.net->test(*req, &done, &size);
  if (res != ncclSuccess) {
    *req = nullptr;
    if (gone == nullptr)
      netLinkCall(link, what, res);
    else
      gone(link, what);
    return false;
  }
  if (!done) return false;
  *req = nullptr;
  if (bytes != nullptr) *bytes = size;
  return true;
}

bool registerSide(NetLink& link, void* comm, void** mh) {
  if (*mh != nullptr) return true;
  return netLinkCall(link, "regMr(side)",
                     link.net->regMr(comm, link.side.get(), sizeof(netwire::SideBuffers), CHORUS_NET_PTR_HOST, mh));
}

namespace {

void postHello(NetLink& link, bool* progressed) {
  netwire::SideBuffers& s = *link.side;
  if (link.revListen == nullptr && link.revComm == nullptr) {
    clearLastError();
    if (!netLinkCall(link, "listen(reverse)", link.net->listen(link.dev, s.helloHandle, &link.revListen))) return;
    s.helloHeader = SlotHeader{};
    s.helloHeader.magic = netwire::kMagic;
    s.helloHeader.kind = Kind::Hello;
  }
  if (!netLinkCall(link, "isend(hello)",
                   link.net->isend(link.comm, &s.helloHeader, netwire::kHelloBytes, 0, link.sideMh, &link.helloReq)))
    return;
  if (link.helloReq == nullptr) return;
  link.helloPosted = true;
  *progressed = true;
}

void takeAck(NetLink& link, size_t bytes) {
  const Ack& a = link.side->ack;
  if (!netwire::validAck(a, bytes, link.posted)) {
    clearLastError();
    reverseGone(link, "sent a malformed ack");
    return;
  }
  link.remoteHead = std::max(link.remoteHead, a.head);
  if (a.doneSeq > link.ctl->doneSeq.load(std::memory_order_relaxed))
    link.ctl->doneSeq.store(a.doneSeq, std::memory_order_release);
  if (a.hasIntent) fifoSetIntent(link.ctl, a.intent);
  if (a.hasMarkHandle && !link.markHandleKnown) {
    std::memcpy(link.side->markHandle, a.markHandle, sizeof(a.markHandle));
    link.markHandleKnown = true;
  }
  if (a.hasVerdict) fifoSetMismatch(link.ctl, a.verdict);
}

void ackSent(NetLink& link) {
  link.ackedHead = link.ackInFlight;
  link.ackedDone = link.doneInFlight;
}

// An inline step (the executor's thread) looks for an ack only while the
// sender waits for one (its last slot asked), else at most every
// kAckPollNs: acks of slots nobody waits for come about once per
// CHORUS_NET_ACK_DELAY_US, and a recv per step would add a system call to
// every slot. The proxy, which sleeps on the stream's descriptor, always looks.
constexpr int64_t kAckPollNs = 100 * 1000;
bool ackPollDeferred(NetLink& link) {
  if (!link.inlineStep || link.lastSentAwaited || link.ackReq == nullptr) return false;
  const int64_t now = NetLink::nowNs();
  if (now - link.ackPolledNs < kAckPollNs) return true;
  link.ackPolledNs = now;
  return false;
}

// The receiver's intent if it changed since the last ack posted.
bool newIntent(NetLink& link, OpPrint* intent) {
  return fifoIntent(link.ctl, intent) && std::memcmp(intent, &link.intentInFlight, sizeof(OpPrint)) != 0;
}

// Whether the receiver's unacked releases (or mark) must be acked now: at
// once when the sender waits for them (its last slot asked, or a verdict),
// else once the oldest change held back is CHORUS_NET_ACK_DELAY_US old.
// Nobody waits for the rest: an all-reduce's sends are proven by what the
// peer sent back (classifySends), and slot reuse waits only for the local
// isend; a late wait (finalize, a drain) gets its ack within the delay.
bool ackIsDue(NetLink& link, bool verdict) {
  const int64_t delayUs = link.ackDelayUs;
  if (verdict || link.senderWaits || delayUs <= 0) return true;
  const int64_t now = NetLink::nowNs();
  const int64_t due = link.ackDueNs.load(std::memory_order_relaxed);
  if (due == 0) link.ackDueNs.store(now + delayUs * 1000, std::memory_order_relaxed);
  return due != 0 && now >= due;
}

}  // namespace

void stepSenderSide(NetLink& link, bool* progressed) {
  if (!registerSide(link, link.comm, &link.sideMh)) return;
  if (!link.helloPosted) postHello(link, progressed);
  if (link.failed || !link.helloPosted) return;
  if (link.helloReq != nullptr && sideDone(link, &link.helloReq, "test(hello)", nullptr)) *progressed = true;
  if (link.failed || link.reverseGone) return;
  if (link.revComm == nullptr) {
    clearLastError();
    const ncclResult_t res = link.net->accept(link.revListen, &link.revComm);
    if (res != ncclSuccess) return reverseGone(link, "accept failed");
    if (link.revComm == nullptr) return;
    link.net->closeListen(link.revListen);
    link.revListen = nullptr;
    *progressed = true;
    if (!registerSide(link, link.revComm, &link.revSideMh)) return;
  }
  if (ackPollDeferred(link)) return;
  for (int round = 0; round < 64 && !link.reverseGone; ++round) {
    if (link.ackReq == nullptr) {
      clearLastError();
      const ncclResult_t res =
          link.net->irecv(link.revComm, &link.side->ack, sizeof(Ack), 0, link.revSideMh, &link.ackReq);
      if (res != ncclSuccess) return reverseGone(link, "irecv failed");
      if (link.ackReq == nullptr) return;
    }
    size_t bytes = 0;
    if (!sideDone(link, &link.ackReq, "closed", reverseGone, &bytes)) return;
    takeAck(link, bytes);
    *progressed = true;
  }
}

uint64_t senderTaken(const NetLink& link) {
  if (!link.framed() || link.reverseGone) return link.completed;
  return std::min(link.completed, link.remoteHead);
}

void stepSenderVerdict(NetLink& link, bool* progressed) {
  if (link.verdictReq != nullptr) {
    if (sideDone(link, &link.verdictReq, "test(verdict)", nullptr)) *progressed = true;
    return;
  }
  if (link.verdictPosted || !link.helloPosted) return;
  netwire::SideBuffers& s = *link.side;
  if (!fifoMismatch(link.ctl, &s.verdictRecord)) return;
  s.verdictHeader = SlotHeader{};
  s.verdictHeader.magic = netwire::kMagic;
  s.verdictHeader.kind = Kind::Verdict;
  if (!netLinkCall(
          link, "isend(verdict)",
          link.net->isend(link.comm, &s.verdictHeader, netwire::kVerdictBytes, 0, link.sideMh, &link.verdictReq)))
    return;
  link.verdictPosted = link.verdictReq != nullptr;
  *progressed = *progressed || link.verdictPosted;
}

void stepReceiverSide(NetLink& link, bool* progressed) {
  netwire::SideBuffers& s = *link.side;
  if (!link.helloDone) {
    if (!registerSide(link, link.comm, &link.sideMh)) return;
    if (!link.helloPosted) {
      if (!netLinkCall(
              link, "irecv(hello)",
              link.net->irecv(link.comm, &s.helloHeader, netwire::kHelloBytes, 0, link.sideMh, &link.helloReq)))
        return;
      link.helloPosted = link.helloReq != nullptr;
      if (!link.helloPosted) return;
    }
    size_t bytes = 0;
    if (!sideDone(link, &link.helloReq, "test(hello)", nullptr, &bytes)) return;
    if (!netwire::validHello(s.helloHeader, bytes)) {
      clearLastError();
      netLinkCall(link, "receive(hello)", fail(ncclRemoteError, "the peer's first message is not a hello"));
      return;
    }
    link.helloDone = true;
    *progressed = true;
  }
  if (link.revComm == nullptr && !link.reverseGone) {
    clearLastError();
    if (!netLinkCall(link, "connect(reverse)", link.net->connect(link.dev, s.helloHandle, &link.revComm))) return;
    if (link.revComm == nullptr) return;
    *progressed = true;
    registerSide(link, link.revComm, &link.revSideMh);
  }
}

void stepReceiverAck(NetLink& link, bool* progressed) {
  if (link.revComm == nullptr || link.reverseGone) return;
  if (link.ackReq != nullptr) {
    if (!sideDone(link, &link.ackReq, "ack failed", reverseGone)) return;
    ackSent(link);
    *progressed = true;
  }
  Ack& a = link.side->ack;
  const uint64_t head = link.ctl->head.load(std::memory_order_acquire);
  const uint64_t done = link.ctl->doneSeq.load(std::memory_order_acquire);
  const bool verdict = !link.verdictAcked && fifoMismatch(link.ctl, &a.verdict);
  OpPrint intent;
  const bool intentMoved = newIntent(link, &intent);
  const bool handle = link.markHandleToSend;  // the mark listener's, once
  if (head == link.ackedHead && done == link.ackedDone && !verdict && !intentMoved && !handle) return;
  if (!ackIsDue(link, verdict || handle)) return;
  a.magic = netwire::kMagic;
  a.hasVerdict = verdict ? 1 : 0;
  a.head = head;
  a.doneSeq = done;
  a.hasIntent = intentMoved ? 1 : 0;
  if (intentMoved) a.intent = intent;
  a.hasMarkHandle = handle ? 1 : 0;
  if (handle) std::memcpy(a.markHandle, link.side->markHandle, sizeof(a.markHandle));
  clearLastError();
  const ncclResult_t res = link.net->isend(link.revComm, &a, sizeof(Ack), 0, link.revSideMh, &link.ackReq);
  if (res != ncclSuccess) return reverseGone(link, "isend(ack) failed");
  if (link.ackReq == nullptr) return;
  link.ackInFlight = head;
  link.doneInFlight = done;
  if (intentMoved) link.intentInFlight = intent;
  link.markHandleToSend = false;
  link.ackDueNs.store(0, std::memory_order_relaxed);
  link.verdictAcked = link.verdictAcked || verdict;
  *progressed = true;
  // A small ack usually left in the isend itself: finish it now, so the next
  // head can go out at once and nobody has to come back for this one.
  if (sideDone(link, &link.ackReq, "ack failed", reverseGone)) ackSent(link);
}

bool sideBusy(const NetLink& link) {
  if (!link.framed()) return false;
  return link.helloReq != nullptr || link.verdictReq != nullptr || link.ackReq != nullptr ||
         link.revListen != nullptr || link.markListen != nullptr || (link.sender && link.markReq != nullptr) ||
         (!link.sender && link.helloDone && link.revComm == nullptr && !link.reverseGone);
}

int64_t earliestAckDue(const std::vector<std::shared_ptr<NetLink>>& links, int64_t presentSince) {
  int64_t earliest = INT64_MAX;
  for (const auto& l : links) {
    const int64_t due = l->ackDueNs.load(std::memory_order_relaxed);
    if (due != 0 && !l->executorPresent(presentSince)) earliest = std::min(earliest, due);
  }
  return earliest;
}

void closeSide(NetLink& link) {
  closeMarks(link);
  if (link.revComm != nullptr && link.revSideMh != nullptr) link.net->deregMr(link.revComm, link.revSideMh);
  if (link.comm != nullptr && link.sideMh != nullptr) link.net->deregMr(link.comm, link.sideMh);
  if (link.revComm != nullptr) (link.sender ? link.net->closeRecv : link.net->closeSend)(link.revComm);
  if (link.revListen != nullptr) link.net->closeListen(link.revListen);
  link.revComm = link.revListen = link.revSideMh = link.sideMh = nullptr;
}

}  // namespace chorus
