// ncclCommFinalize and the finalize that ncclCommDestroy runs first.
//
// Finalizing is a barrier of all ranks, after the GPU kernels of this rank
// (GPU mode) ended: once it completes no rank is inside an operation of the
// communicator, so connections may close and processes exit without a peer
// losing data that was still on its way (a socket, the proxy thread, a shared
// FIFO). The wait has no limit of its own (CHORUS_TIMEOUT_MS bounds it when
// set); it ends early, with an error naming the peer, when a peer process on
// this host exited or a network link broke before every rank had arrived.
#pragma once

#include "nccl.h"

struct ncclComm;

namespace chorus {

// Called by destroy. Skipped when the communicator is finalized, revoked or
// failed (its peers may be gone). When this process holds several ranks of
// the communicator (one thread may drive them all, destroying one after the
// other), only the last of them to be destroyed waits; the others arrive.
ncclResult_t commFinalizeForDestroy(ncclComm* comm);

}  // namespace chorus
