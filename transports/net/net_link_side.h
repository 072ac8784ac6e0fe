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

// The earliest time one of `links` must send an ack it holds back for a
// batch (steady clock, ns), or INT64_MAX: the proxy wakes for it.
int64_t earliestAckDue(const std::vector<std::shared_ptr<NetLink>>& links);

// Whether side requests are in flight that need polling.
bool sideBusy(const NetLink& link);
// Closes the reverse connection and the side registrations.
void closeSide(NetLink& link);

}  // namespace chorus
