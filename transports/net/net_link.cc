// Per-link progress of the proxy thread. A backend error marks the link
// failed and records code + message in its LinkHealth, which the executor
// turns into an error naming the peer the next time it waits on it.
#include "transports/net/net_link.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/coll_types.h"
#include "core/result.h"
#include "core/wait_limit.h"
#include "transports/net/net_link_side.h"

namespace chorus {
namespace {

void markFailed(NetLink& link, const char* what, ncclResult_t res, const char* why) {
  std::string msg = std::string(link.label) + ": " + link.net->name + " " + what + " failed: " + why;
  link.failed = true;
  link.health->setFailed(res, msg.c_str());
  CHORUS_INFO(kLogNet | kLogProxy, "net proxy: %s", msg.c_str());
}

void stepAccept(NetLink& link, bool* progressed) {
  clearLastError();
  if (!netLinkCall(link, "accept", link.net->accept(link.listenComm, &link.comm)) || link.comm == nullptr) return;
  *progressed = true;
  link.net->closeListen(link.listenComm);
  link.listenComm = nullptr;
  netLinkCall(link, "registering the slots", registerLinkSlots(link));
}

// Framed: the slot's fingerprint goes in the header in front of its payload.
void writeSlotHeader(NetLink& link, uint64_t i) {
  netwire::SlotHeader h{};
  h.magic = netwire::kMagic;
  h.kind = netwire::Kind::Slot;
  h.print = link.ctl->prints.slot[i % link.nslots];
  h.flags = link.ctl->senderWaits[i % link.nslots] != 0 ? netwire::kSenderWaits : 0;
  link.lastSentAwaited = h.flags != 0;
  memcpy(link.message(i), &h, sizeof(h));
}

// Sends slot i: its header and payload, or (kUserMemorySlotMarker) its
// header and the piece of application memory the slot points at.
ncclResult_t sendSlot(NetLink& link, uint64_t i, void** req) {
  const uint32_t bytes = link.ctl->sizes[i % link.nslots];
  if (!link.framed()) return link.net->isend(link.comm, link.message(i), bytes, 0, link.mhandle, req);
  writeSlotHeader(link, i);
  if (bytes != kUserMemorySlotMarker)
    return link.net->isend(link.comm, link.message(i), bytes + netwire::kSlotHeaderBytes, 0, link.mhandle, req);
  UserMemorySlot piece;
  memcpy(&piece, link.slot(i), sizeof(piece));
  if (link.gatherSend == nullptr) return fail(ncclInternalError, "handed user memory, but cannot send from it");
  return link.gatherSend(link.comm, link.message(i), netwire::kSlotHeaderBytes,
                         reinterpret_cast<const void*>(static_cast<uintptr_t>(piece.address)), piece.bytes, 0, req);
}

void stepSend(NetLink& link, bool* progressed) {
  const uint64_t tail = link.ctl->tail.load(std::memory_order_acquire);
  while (fifo::slotPublished(link.posted, tail) && (!link.framed() || link.helloPosted)) {
    const uint64_t i = link.posted;
    void* req = nullptr;
    if (!netLinkCall(link, "isend", sendSlot(link, i, &req))) return;
    if (req == nullptr) break;
    link.requests[i % link.nslots] = req;
    ++link.posted;
    *progressed = true;
  }
  bool moved = false;
  while (link.completed < link.posted) {
    int done = 0;
    size_t bytes = 0;
    if (!netLinkCall(link, "test(isend)", link.net->test(link.requests[link.completed % link.nslots], &done, &bytes)))
      return;
    if (!done) break;
    link.requests[link.completed % link.nslots] = nullptr;
    ++link.completed;
    moved = true;
  }
  if (moved) {
    link.ctl->head.store(link.completed, std::memory_order_release);
    *progressed = true;
  }
  const uint64_t taken = senderTaken(link);
  if (taken != link.ctl->taken.load(std::memory_order_relaxed)) {
    link.ctl->taken.store(taken, std::memory_order_release);
    *progressed = true;
  }
}

// A finished receive into slot `i`: publishes it (false: the link stops).
bool publish(NetLink& link, uint64_t i, size_t bytes) {
  if (!link.framed()) {
    link.ctl->sizes[i % link.nslots] = static_cast<uint32_t>(bytes);
    return true;
  }
  netwire::SlotHeader h{};
  const char* why = nullptr;
  if (bytes >= sizeof(h)) memcpy(&h, link.message(i), sizeof(h));
  if (!netwire::validSlotMessage(h, bytes, &why)) {
    markFailed(link, "receive", ncclRemoteError, why);
    return false;
  }
  if (h.kind == netwire::Kind::Verdict) {
    OpMismatchRecord r;
    memcpy(&r, link.slot(i), sizeof(r));
    fifoSetMismatch(link.ctl, r);
    link.verdictSeen = true;  // the peer stopped; the communicator is failed for good
    return false;
  }
  if (link.landings != nullptr) link.landings->landed[i % link.nslots] = link.landedInUser[i % link.nslots] ? 1 : 0;
  link.ctl->sizes[i % link.nslots] = static_cast<uint32_t>(bytes - sizeof(h));
  link.ctl->prints.slot[i % link.nslots] = h.print;
  link.senderWaits = (h.flags & netwire::kSenderWaits) != 0;
  link.markWanted = link.markWanted || h.print.coll == static_cast<uint8_t>(CollType::Scatter);
  return true;
}

// A receive asks, once its slot header is in, whether its payload may land
// where the executor offered to read it (LandingTable): only a slot message
// of exactly the offered size, for the offered sequence number.
char* landPiece(void* arg, const char* prefix, size_t messageBytes) {
  const auto* ask = static_cast<const NetLink::LandingAsk*>(arg);
  NetLink& link = *ask->link;
  if (link.landingsDropped) return nullptr;
  netwire::SlotHeader h{};
  memcpy(&h, prefix, sizeof(h));
  const char* why = nullptr;
  if (!netwire::validSlotMessage(h, messageBytes, &why) || h.kind != netwire::Kind::Slot) return nullptr;
  const uint32_t pos = static_cast<uint32_t>(ask->seq % link.nslots);
  const LandingTable::Entry& offer = link.landings->entries[pos];
  if (offer.seqPlusOne.load(std::memory_order_acquire) != ask->seq + 1 ||
      offer.bytes != messageBytes - netwire::kSlotHeaderBytes)
    return nullptr;
  link.landedInUser[pos] = true;
  return reinterpret_cast<char*>(static_cast<uintptr_t>(offer.address));
}

ncclResult_t postRecv(NetLink& link, uint64_t i, void** req) {
  if (link.landingRecv == nullptr)
    return link.net->irecv(link.comm, link.message(i), link.stride(), 0, link.mhandle, req);
  const uint32_t pos = static_cast<uint32_t>(i % link.nslots);
  link.landingAsks[pos] = NetLink::LandingAsk{&link, i};
  link.landedInUser[pos] = false;
  return link.landingRecv(link.comm, link.message(i), link.stride(), 0, netwire::kSlotHeaderBytes, &landPiece,
                          &link.landingAsks[pos], req);
}

// Whether slot `completed`'s receive finished, and with GPUDirect its flush
// too (*bytes: its size). False: not yet, or the link failed.
bool recvLanded(NetLink& link, bool* progressed, size_t* bytes) {
  void*& req = link.requests[link.completed % link.nslots];
  if (req != nullptr) {
    int done = 0;
    if (!netLinkCall(link, "test(irecv)", link.net->test(req, &done, &link.landedBytes)) || !done) return false;
    req = nullptr;
    *progressed = true;
    if (link.flushAfterRecv && link.landedBytes > 0 && link.net->iflush != nullptr &&
        !netLinkCall(
            link, "iflush",
            link.net->iflush(link.comm, link.message(link.completed), link.landedBytes, link.mhandle, &link.flushReq)))
      return false;
  }
  if (link.flushReq != nullptr) {
    int done = 0;
    size_t ignored = 0;
    if (!netLinkCall(link, "test(iflush)", link.net->test(link.flushReq, &done, &ignored)) || !done) return false;
    link.flushReq = nullptr;
    *progressed = true;
  }
  *bytes = link.landedBytes;
  return true;
}

void stepRecv(NetLink& link, bool* progressed) {
  if (link.framed() && !link.helloDone) return;
  const uint64_t head = link.ctl->head.load(std::memory_order_acquire);
  while (fifo::slotFree(link.posted, head, link.nslots)) {
    const uint64_t i = link.posted;
    void* req = nullptr;
    if (!netLinkCall(link, "irecv", postRecv(link, i, &req))) return;
    if (req == nullptr) break;
    link.requests[i % link.nslots] = req;
    ++link.posted;
    *progressed = true;
  }
  // A step that passes on a release has no reason to look for arrivals: the
  // executor looks when it waits for the next slot.
  while (!link.publishOnly && link.completed < link.posted && !link.verdictSeen) {
    size_t bytes = 0;
    if (!recvLanded(link, progressed, &bytes)) return;
    if (!publish(link, link.completed, bytes)) return;
    link.ctl->tail.store(++link.completed, std::memory_order_release);
  }
}

}  // namespace

bool netLinkCall(NetLink& link, const char* what, ncclResult_t res) {
  if (res == ncclSuccess) return true;
  markFailed(link, what, res, lastErrorMessage());
  return false;
}

void stepLink(NetLink& link, bool* progressed, bool* busy) {
  if (link.failed) return;
  if (link.comm == nullptr) {
    stepAccept(link, progressed);
    *busy = *busy || !link.failed;
    if (link.comm == nullptr || link.failed) return;
  }
  if (link.sender) {
    if (link.framed()) stepSenderSide(link, progressed);
    if (!link.failed) stepSend(link, progressed);
    if (!link.failed && link.framed()) stepSenderVerdict(link, progressed);
    if (!link.failed && link.framed()) stepSenderMarks(link, progressed);
  } else {
    if (link.framed()) stepReceiverSide(link, progressed);
    if (!link.failed && !link.verdictSeen) stepRecv(link, progressed);
    if (!link.failed && link.framed()) stepReceiverMarks(link, progressed);
    if (!link.failed && link.framed()) stepReceiverAck(link, progressed);
  }
  if (link.failed) return;
  if (link.completed < link.posted || link.kernelDriven || sideBusy(link)) *busy = true;
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
  // Framed: the receiver connects back as soon as it has the hello; keep the
  // listener until then, or its connect would wait for a listener that is gone.
  const bool reverseSettled = !link.framed() || link.revListen == nullptr || link.reverseGone;
  const bool drained =
      link.completed == link.ctl->tail.load(std::memory_order_acquire) && reverseSettled && !marksPending(link);
  if (!drained && now >= link.drainDeadline)
    CHORUS_WARN(kLogNet, "net proxy: %s: closing with %llu unsent slot(s): the peer did not take them in time",
                link.label.c_str(), (unsigned long long)(link.ctl->tail.load() - link.completed));
  return drained || now >= link.drainDeadline;
}

void hurryDrain(NetLink& link, std::chrono::steady_clock::time_point deadline) {
  if (!link.draining || link.drainDeadline > deadline) link.drainDeadline = deadline;
  link.draining = true;
}

namespace {
// Registers the slots through the link's dma-buf fd, which is closed after.
ncclResult_t registerDmaBuf(NetLink& link, size_t bytes) {
  const ncclResult_t res =
      link.net->regMrDmaBuf == nullptr
          ? fail(ncclInternalError, "%s: %s has no regMrDmaBuf", link.label.c_str(), link.net->name)
          : link.net->regMrDmaBuf(link.comm, link.message(0), bytes, link.slotPtrType, link.dmabufOffset, link.dmabufFd,
                                  &link.mhandle);
  close(link.dmabufFd);
  link.dmabufFd = -1;
  return res;
}
}  // namespace

ncclResult_t registerLinkSlots(NetLink& link) {
  const size_t bytes = static_cast<size_t>(link.stride()) * link.nslots;
  clearLastError();
  if (link.dmabufFd >= 0) {
    const ncclResult_t res = registerDmaBuf(link, bytes);
    if (res == ncclSuccess || !link.regMrFallback) return res;
    CHORUS_WARN(kLogNet, "net: %s: regMrDmaBuf failed (%s): registering the device slots with regMr instead",
                link.label.c_str(), lastErrorMessage()[0] != '\0' ? lastErrorMessage() : ncclGetErrorString(res));
    clearLastError();
  }
  return link.net->regMr(link.comm, link.message(0), bytes, link.slotPtrType, &link.mhandle);
}

void closeLink(NetLink& link) {
  closeSide(link);
  if (link.dmabufFd >= 0) close(link.dmabufFd);
  link.dmabufFd = -1;
  if (link.comm != nullptr && link.mhandle != nullptr) link.net->deregMr(link.comm, link.mhandle);
  if (link.comm != nullptr) (link.sender ? link.net->closeSend : link.net->closeRecv)(link.comm);
  if (link.listenComm != nullptr) link.net->closeListen(link.listenComm);
  link.comm = link.listenComm = link.mhandle = nullptr;
}

}  // namespace chorus
