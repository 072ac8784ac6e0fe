#include "transports/net_socket/socket_wire.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "core/result.h"

namespace chorus::sock {

ncclResult_t decodeHandle(const void* in, SockAddr* addr, uint64_t* nonce, uint64_t* processToken) {
  Handle h;
  std::memcpy(&h, in, sizeof(h));
  if (h.magic != kHandleMagic) return fail(ncclInvalidArgument, "socket: connect: the handle is not a socket handle");
  *addr = SockAddr{};
  if (h.family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&addr->storage);
    sin->sin_family = AF_INET;
    std::memcpy(&sin->sin_addr, h.addr, 4);
    addr->len = sizeof(sockaddr_in);
  } else if (h.family == AF_INET6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&addr->storage);
    sin6->sin6_family = AF_INET6;
    std::memcpy(&sin6->sin6_addr, h.addr, 16);
    sin6->sin6_scope_id = h.scopeId;
    addr->len = sizeof(sockaddr_in6);
  } else {
    return fail(ncclInvalidArgument, "socket: connect: unknown address family %u in handle", h.family);
  }
  addr->setPort(h.port);
  *nonce = h.nonce;
  if (processToken) *processToken = h.processToken;
  return ncclSuccess;
}

const char* refuseHello(const StreamHello& h, uint64_t nonce) {
  if (h.magic != kHelloMagic) return "not a Chorus socket stream";
  if (h.nonce != nonce) return "wrong connection nonce";
  return nullptr;
}

int64_t helloDataStreams(const StreamHello& h) {
  const uint64_t ndata = h.nthreads == 0 ? 0 : uint64_t(h.nthreads) * h.nsocks;
  if (ndata > kMaxStreams || h.nsocks == 0) return -1;
  return static_cast<int64_t>(ndata);
}

}  // namespace chorus::sock
