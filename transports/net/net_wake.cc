#include "transports/net/net_wake.h"

#include "transports/net_socket/socket_backend.h"

namespace chorus {

NetPollFdFn netPollFdFor(const void* backendTable) {
  if (backendTable == netSocketBackend()) return &netSocketPollFd;
  return nullptr;
}

bool netInlineMovesFor(const void* backendTable) { return backendTable == netSocketBackend(); }

}  // namespace chorus
