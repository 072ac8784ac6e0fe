// What UCX connection setup puts on the wire: the listen handle (travels
// through the bootstrap inside CHORUS_NET_HANDLE_BYTES) and the two stream
// messages of the handshake. Pure code, no UCX types, unit-tested.
//
// Handshake: the client creates an endpoint to the listener's sockaddr and
// sends a Hello on the endpoint's stream; the server answers with a Welcome
// that carries the connection id it assigned. Stream messages belong to one
// endpoint, so the server always knows which endpoint a Hello came from; the
// data path then uses the tag API, whose tags carry the connection id.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bootstrap/socket.h"
#include "nccl.h"

namespace chorus::ucx {

struct ListenHandle {
  SockAddr addr;          // listener address (port set)
  uint64_t listenId = 0;  // random, echoed in Hello so a stray client is refused
};
// Writes the handle into `out` (CHORUS_NET_HANDLE_BYTES bytes).
void encodeListenHandle(const ListenHandle& handle, void* out);
// ncclInvalidArgument (with a message) on a malformed handle.
ncclResult_t decodeListenHandle(const void* in, ListenHandle* handle);

constexpr size_t kHelloBytes = 16;
constexpr size_t kWelcomeBytes = 8;
void encodeHello(uint64_t listenId, uint8_t out[kHelloBytes]);
bool decodeHello(const uint8_t in[kHelloBytes], uint64_t* listenId);
void encodeWelcome(uint32_t connId, uint8_t out[kWelcomeBytes]);
bool decodeWelcome(const uint8_t in[kWelcomeBytes], uint32_t* connId);

// Data tags: the receiver-assigned connection id in the high 32 bits, the
// caller's tag in the low 32, matched with a full mask.
inline uint64_t dataTag(uint32_t connId, int tag) {
  return (static_cast<uint64_t>(connId) << 32) | static_cast<uint32_t>(tag);
}

}  // namespace chorus::ucx
