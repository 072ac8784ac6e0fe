// The framed link's own messages (transports/net/net_wire.h): the hello that
// sets up the reverse connection, the receiver's acks and the verdicts.
// Called by stepLink (net_link.cc) on the proxy thread.
#pragma once

#include <memory>
#include <vector>

#include "transports/net/net_link.h"

namespace chorus {

// Records a failed backend call on the link (false); the link is not touched again.
bool netLinkCall(NetLink& link, const char* what, ncclResult_t res);
// What a failed side request ends: only its side connection (`gone`), or the
// whole link (nullptr: the failure is recorded as by netLinkCall).
using SideGone = void (*)(NetLink& link, const char* what);
// Polls one side request; true once it finished (freed by the backend).
bool sideDone(NetLink& link, void** req, const char* what, SideGone gone, size_t* bytes = nullptr);
// Registers the link's side buffers on `comm` once (*mh).
bool registerSide(NetLink& link, void* comm, void** mh);

// Sender: posts the hello, accepts the reverse connection and takes acks
// (the receiver's head, its verdict). Slots may be posted once helloPosted.
void stepSenderSide(NetLink& link, bool* progressed);
// Sender: slots both sent and released by the receiver (FifoControl::taken).
uint64_t senderTaken(const NetLink& link);
// Sender: forwards this rank's verdict once (after the slots posted so far).
void stepSenderVerdict(NetLink& link, bool* progressed);

// Receiver: takes the hello and connects back. Slots may be received once helloDone.
void stepReceiverSide(NetLink& link, bool* progressed);
// Receiver: acks the executor's head and this rank's verdict.
void stepReceiverAck(NetLink& link, bool* progressed);

// The earliest time one of `links` whose executor has not stepped it since
// `presentSince` (NetLink::executorPresent; INT64_MAX: any link) must send
// an ack it holds back for a batch (steady clock, ns), or INT64_MAX: the
// proxy wakes for it (an executor that is there sends its own).
int64_t earliestAckDue(const std::vector<std::shared_ptr<NetLink>>& links, int64_t presentSince);

// The mark connection (net_link_marks.cc). Receiver: once a scatter slot
// arrived, listens (the handle goes out in the next ack), accepts and takes
// marks into FifoControl::sentDoneSeq.
void stepReceiverMarks(NetLink& link, bool* progressed);
// Sender: sends FifoControl::sentDoneSeq each time it grew, connecting on
// the first one (once the receiver's handle came in an ack).
void stepSenderMarks(NetLink& link, bool* progressed);
// Sender: a mark is still to be sent or in flight (the link drains it first).
bool marksPending(const NetLink& link);
// Closes the mark connection.
void closeMarks(NetLink& link);

// Whether side requests are in flight that need polling.
bool sideBusy(const NetLink& link);
// Closes the reverse connection and the side registrations.
void closeSide(NetLink& link);

}  // namespace chorus
