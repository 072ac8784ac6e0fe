// The store servers this process runs, keyed by (address, secret). It decides
// whether connectStore hands out the in-memory store (this process serves the
// id) or a TCP client, and it remembers servers that already shut down so a
// late rank fails fast instead of retrying against a closed port.
#pragma once

#include <memory>

#include "bootstrap/tcp_store_server.h"

namespace chorus {

// Starts a server on `addr` (port 0: ephemeral), registers it, and returns the
// address it listens on.
ncclResult_t startRegisteredServer(const SockAddr& addr, const wire::Secret& secret, SockAddr* bound);

// The live server this process runs for (addr, secret), or nullptr.
std::shared_ptr<TcpStoreServer> findRegisteredServer(const SockAddr& addr, const wire::Secret& secret);

// How long the store server tolerates a missing hello or a stalled half frame.
TcpStoreServer::Options serverOptionsFromParams();

}  // namespace chorus
