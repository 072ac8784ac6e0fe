// One TCP connection for both directions between two processes. Each
// direction of a pair of ranks is its own connection (listen / connect /
// accept), so without this every message crossing one way is answered by a
// bare TCP acknowledgement on its own connection, a packet per message for
// the kernels of both ends. Instead, a send connection moves its messages
// onto the unused reverse direction of a connection accepted from the same
// peer process, where the peer's own messages carry the acknowledgements.
//
// The move is the sender's: at a message boundary it sends a MOVED header
// (kHeaderMoved, size = the id of the connection it moves onto) on its own
// control stream and goes on writing its messages into the accepted
// connection's socket. The receiver reads its stream up to that header,
// looks up the connection it once connected under that id (this registry),
// and reads the rest from that socket, whose writing direction its own send
// connection already uses. Data streams (helper threads) never move.
//
// Which side moves: the one whose (process token, connection id) is the
// smaller, so two processes never move onto each other's connections, and
// between connections of one process (a rank talking to another in the same
// process over sockets) one of each pair moves. A connection carries at most
// one moved direction; sockets are shared (the last owner closes them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "bootstrap/socket.h"

namespace chorus::sock {

using SharedFd = std::shared_ptr<ForkClosedFd>;

inline constexpr uint32_t kHeaderMoved = 4;  // MessageHeader flag; size: the connection id moved onto
// After a move, an inline payload larger than kSharedPayloadMax follows its
// header on the connection's own control stream instead of the shared one
// (MessageHeader flag kHeaderPayloadOwn): a bulk transfer one way on the
// socket the peer is sending on makes each side's sends wait on the socket
// its receives hold, where small messages gain from sharing it.
inline constexpr uint32_t kHeaderPayloadOwn = 8;
inline constexpr size_t kSharedPayloadMax = 16384;

// Who a connection joins: its id (the connector's random number) and the
// other end's process token (from the listener's handle or the hello).
struct ConnIdentity {
  uint64_t connId = 0;
  uint64_t peerToken = 0;
};

// Whether a send connection could ever move (the smaller side moves; equal
// tokens: connections of one process, decided per pair by their ids).
bool mayEverMove(const ConnIdentity& send);

// A connected socket is registered before its hello leaves (so the peer
// cannot accept it and move onto it before this process knows it). When its
// comm closes it is retired: kept, while the peer has not closed its end,
// for a receiver told to move onto it; forgotten when setup fails.
void registerConnected(uint64_t connId, const SharedFd& ctrl);
void retireConnected(uint64_t connId, const SharedFd& ctrl);
void forgetConnected(uint64_t connId);
void registerAccepted(uint64_t connId, uint64_t peerToken, const SharedFd& ctrl);
void unregisterAccepted(uint64_t connId);

// The socket of the connection this process connected under connId (null
// when there is none any more).
SharedFd connectedSocket(uint64_t connId);

// Claims the reverse direction of an accepted connection from the send
// connection's peer process that this connection may move onto; null when
// there is none (yet). *targetId: that connection's id.
SharedFd claimReverse(const ConnIdentity& me, uint64_t* targetId);

// Bumped whenever a connection is accepted: a failed claim is worth
// repeating only after it changed.
uint64_t acceptedGeneration();

}  // namespace chorus::sock
