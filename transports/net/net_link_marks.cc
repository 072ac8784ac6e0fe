// The mark connection (transports/net/net_wire.h, MarkMessage): a scatter's
// root tells each receiver that it finished (FifoControl::sentDoneSeq); the
// receiver waits for that before it returns (plan_verdict.cc, rootsDone), so
// it cannot succeed while its root fails. Set up only between ranks that
// scatter: the receiver listens when the first scatter slot arrives and
// sends the handle in its next ack; the sender connects when it first has a
// mark to send (by then it has that ack: it waited for the receiver's
// completion mark, which travels in the same or a later ack).
//
// Failures: a backend error on either side fails the link (as on the
// forward connection). The receiver's posted receive ending because the
// sender closed the connection is not an error: every mark the sender made
// was sent before it closed (marksPending keeps its link open until then).
#include "core/log.h"
#include "core/result.h"
#include "transports/net/net_link_side.h"

namespace chorus {
namespace {

using netwire::Kind;
using netwire::MarkMessage;

void marksClosed(NetLink& link, const char* what) {
  if (link.markGone) return;
  link.markGone = true;
  CHORUS_INFO(kLogNet | kLogProxy, "net proxy: %s: mark connection %s: %s", link.label.c_str(), what,
              lastErrorMessage());
}

// Receiver: listens (once), then accepts; true once connected and registered.
bool acceptMarks(NetLink& link, bool* progressed) {
  if (link.markComm != nullptr) return true;
  netwire::SideBuffers& s = *link.side;
  if (link.markListen == nullptr) {
    clearLastError();
    if (!netLinkCall(link, "listen(mark)", link.net->listen(link.dev, s.markHandle, &link.markListen))) return false;
    link.markHandleToSend = true;  // goes out with the next ack
    *progressed = true;
  }
  clearLastError();
  if (!netLinkCall(link, "accept(mark)", link.net->accept(link.markListen, &link.markComm))) return false;
  if (link.markComm == nullptr) return false;
  link.net->closeListen(link.markListen);
  link.markListen = nullptr;
  *progressed = true;
  return registerSide(link, link.markComm, &link.markMh);
}

}  // namespace

void stepReceiverMarks(NetLink& link, bool* progressed) {
  if (!link.markWanted || link.markGone || !acceptMarks(link, progressed)) return;
  for (int round = 0; round < 64; ++round) {
    const MarkMessage& m = link.side->mark;
    if (link.markReq == nullptr) {
      clearLastError();
      if (!netLinkCall(
              link, "irecv(mark)",
              link.net->irecv(link.markComm, &link.side->mark, sizeof(MarkMessage), 0, link.markMh, &link.markReq)))
        return;
      if (link.markReq == nullptr) return;
    }
    size_t bytes = 0;
    if (!sideDone(link, &link.markReq, "closed", marksClosed, &bytes)) return;
    if (!netwire::validMark(m, bytes)) {
      clearLastError();
      netLinkCall(link, "receive(mark)", fail(ncclRemoteError, "the peer sent a malformed completion mark"));
      return;
    }
    if (m.sentDoneSeq > link.ctl->sentDoneSeq.load(std::memory_order_relaxed))
      link.ctl->sentDoneSeq.store(m.sentDoneSeq, std::memory_order_release);
    *progressed = true;
  }
}

void stepSenderMarks(NetLink& link, bool* progressed) {
  if (link.markReq != nullptr) {
    if (!sideDone(link, &link.markReq, "test(mark)", nullptr)) return;
    *progressed = true;
  }
  const uint64_t sent = link.ctl->sentDoneSeq.load(std::memory_order_acquire);
  if (sent <= link.markSent || !link.markHandleKnown) return;
  netwire::SideBuffers& s = *link.side;
  if (link.markComm == nullptr) {
    clearLastError();
    if (!netLinkCall(link, "connect(mark)", link.net->connect(link.dev, s.markHandle, &link.markComm))) return;
    if (link.markComm == nullptr) return;  // connecting: again on the next step
    *progressed = true;
    if (!registerSide(link, link.markComm, &link.markMh)) return;
  }
  s.mark = MarkMessage{netwire::kMagic, Kind::Mark, sent};
  clearLastError();
  if (!netLinkCall(link, "isend(mark)",
                   link.net->isend(link.markComm, &s.mark, sizeof(MarkMessage), 0, link.markMh, &link.markReq)))
    return;
  if (link.markReq == nullptr) return;
  link.markSent = sent;
  *progressed = true;
  if (sideDone(link, &link.markReq, "test(mark)", nullptr)) return;  // usually gone in the isend itself
}

bool marksPending(const NetLink& link) {
  if (!link.sender || link.failed) return false;
  return link.markReq != nullptr ||
         (link.markHandleKnown && link.ctl->sentDoneSeq.load(std::memory_order_acquire) > link.markSent);
}

void closeMarks(NetLink& link) {
  if (link.markComm != nullptr && link.markMh != nullptr) link.net->deregMr(link.markComm, link.markMh);
  if (link.markComm != nullptr) (link.sender ? link.net->closeSend : link.net->closeRecv)(link.markComm);
  if (link.markListen != nullptr) link.net->closeListen(link.markListen);
  link.markComm = link.markListen = link.markMh = nullptr;
}

}  // namespace chorus
