// Watching for peers that went away while this rank waits for them outside
// the executor (connection setup, the finalize barrier): a peer process on
// this host that exited, or a connection whose network link broke. Used as
// the stop condition of a WaitBound, so that a wait with no time limit still
// ends promptly, naming the peer, when the peer is dead.
#pragma once

#include <string>

#include "bootstrap/store.h"

struct ncclComm;

namespace chorus {

// Whether a peer process on this host exited; *why names it. Reads only the
// peer list, fixed at init. Logs nothing.
bool commPeerProcessGone(const ncclComm* comm, std::string* why);

// Whether a peer is gone: its process on this host exited, or a connection's
// network link to it broke (this reads the connection table: the caller holds
// the communicator's opMutex). *why names it. Logs nothing.
bool commPeerGone(const ncclComm* comm, std::string* why);

// `bound` plus a stop condition that runs commPeerGone about every 250 ms and
// leaves its description in *why (which must outlive the wait).
WaitBound watchPeers(WaitBound bound, const ncclComm* comm, std::string* why);

// For a wait on `bound` from watchPeers that failed with `res`: when a peer
// was gone, the failure is re-recorded as ncclRemoteError naming it.
ncclResult_t explainPeerGone(ncclResult_t res, const ncclComm* comm, const std::string& why);

}  // namespace chorus
