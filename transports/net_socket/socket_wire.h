// What the socket backend puts on the wire and in its handle. All integers
// are in the host's byte order; every supported host is little-endian.
//
// A connection is one control stream plus nthreads x nsocks data streams.
// Each stream opens with a StreamHello. Every message then starts with a
// MessageHeader on the control stream; a message of at most inlineBytes (or
// any message when there are no data streams) follows its header on the
// control stream, a larger one is cut into one contiguous part per data
// stream (splitMessage) and each part travels on its own stream. Both sides
// process messages in posting order, so parts need no headers of their own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bootstrap/socket.h"
#include "chorus/net_plugin.h"
#include "nccl.h"

namespace chorus::sock {

inline constexpr uint32_t kHandleMagic = 0x4b4f5343;  // "CSOK"
inline constexpr uint32_t kHelloMagic = 0x4c454843;   // "CHEL"
inline constexpr uint32_t kMaxStreams = 64;           // data streams per connection

// Written by listen() into the CHORUS_NET_HANDLE_BYTES handle.
struct Handle {
  uint32_t magic;
  uint16_t family;  // AF_INET or AF_INET6
  uint16_t port;
  uint8_t addr[16];
  uint32_t scopeId;
  uint32_t reserved;
  uint64_t nonce;         // random per listen(); a stream presenting another one is refused
  uint64_t processToken;  // the listener's process (socket_pairing.h)
};
static_assert(sizeof(Handle) <= CHORUS_NET_HANDLE_BYTES);

struct StreamHello {
  uint32_t magic;
  uint32_t stream;    // 0: control, 1..n: data stream index + 1
  uint32_t nthreads;  // the sender's NCCL_SOCKET_NTHREADS (the receiver adopts it)
  uint32_t nsocks;    // the sender's NCCL_NSOCKS_PERTHREAD
  uint64_t nonce;
  uint64_t connId;        // random per connect(); groups the streams of one connection
  uint64_t processToken;  // the connector's process (socket_pairing.h)
};

inline constexpr uint32_t kHeaderGoodbye = 1;  // orderly close: no message follows
inline constexpr uint32_t kHeaderInline = 2;   // the payload follows on the control stream
struct MessageHeader {
  uint32_t tag;
  uint32_t flags;
  uint64_t size;
};

// Part `i` of `nparts` of a `size`-byte message: [*offset, *offset + *bytes).
inline void splitMessage(size_t size, uint32_t nparts, uint32_t i, size_t* offset, size_t* bytes) {
  const size_t base = size / nparts, extra = size % nparts;
  *offset = i * base + (i < extra ? i : extra);
  *bytes = base + (i < extra ? 1 : 0);
}

// Checks of bytes that come from the network (tests/fuzz feeds them junk).
// The listener's address and nonce from a handle of CHORUS_NET_HANDLE_BYTES;
// ncclInvalidArgument with a message for a malformed one.
// With `processToken`, also the listener's process token.
ncclResult_t decodeHandle(const void* in, SockAddr* addr, uint64_t* nonce, uint64_t* processToken = nullptr);
// Why a stream's hello is refused by a listener whose nonce is `nonce`, or
// null when it is a hello for this listener.
const char* refuseHello(const StreamHello& h, uint64_t nonce);
// How many data streams the first hello of a connection asks for, or -1
// when that shape is refused (more than kMaxStreams, or no socket per thread).
int64_t helloDataStreams(const StreamHello& h);

}  // namespace chorus::sock
