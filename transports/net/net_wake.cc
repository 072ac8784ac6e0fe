#include "transports/net/net_wake.h"

#include "transports/net_socket/socket_backend.h"
#ifdef CHORUS_HAVE_UCX
#include "transports/net_ucx/ucx_backend.h"
#endif

namespace chorus {

NetPollFdFn netPollFdFor(const void* backendTable) {
  if (backendTable == netSocketBackend()) return &netSocketPollFd;
  return nullptr;
}

bool netInlineMovesFor(const void* backendTable) {
  if (backendTable == netSocketBackend()) return true;
#ifdef CHORUS_HAVE_UCX
  // Its calls take the worker's mutex (a UCS_THREAD_MODE_SERIALIZED worker).
  if (backendTable == netUcxBackend()) return true;
#endif
  return false;
}

}  // namespace chorus
