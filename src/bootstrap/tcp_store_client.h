// The TCP client side of the store (protocol in wire.h). One connection per
// store handle; threads may share it: requests carry ids, and whichever waiting
// thread holds the "reader" role polls the socket in short slices and hands
// replies to their owners, so every wait honours its own deadline and abort
// flag without a helper thread. A server that goes away (its process killed)
// closes the socket, which fails every pending and later call promptly with
// ncclRemoteError naming the server address.
#pragma once

#include <memory>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "bootstrap/wire.h"

namespace chorus {

// Connects to the store server at `addr`, retrying while nothing listens there
// yet (until bound.deadline, or for at most refusedForMs when that is >= 0:
// for a server known to have listened already), and authenticates with
// `secret` (within bound.deadline). `rank` only labels the connection in the
// server's logs.
ncclResult_t connectTcpStore(const SockAddr& addr, const wire::Secret& secret, int rank, const WaitBound& bound,
                             std::shared_ptr<Store>* store, int64_t refusedForMs = -1);

}  // namespace chorus
