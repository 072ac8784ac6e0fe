// Creating and ending communicators: init from a unique id, split, shrink,
// finalize, revoke, destroy, abort. (ncclCommInitAll, a group of inits, is
// the group layer's: src/enqueue/comm_init_all.h.)
#pragma once

#include <functional>

#include "nccl.h"

namespace chorus {

// Where work that rendezvouses with the other ranks (a creation, a finalize)
// runs. Empty: now, on the calling thread (or, for a non-blocking
// communicator, on its own thread). Inside ncclGroupStart/End the API layer
// passes the group's queue (enqueueInit), which runs the work at ncclGroupEnd
// and reports its result there. The communicator layer never asks whether a
// group is open: it sits below the group layer. `uses`: the communicator the
// work runs on, which must not be freed before it ran (groupDropComm);
// `finalize`: the work is its finalize, which destroying it makes moot.
using DeferRendezvous = std::function<ncclResult_t(const ncclComm* uses, bool finalize, std::function<ncclResult_t()>)>;

ncclResult_t commInitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* cfg,
                          const DeferRendezvous& defer);
ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm_t* out, const ncclConfig_t* cfg,
                       const DeferRendezvous& defer);
ncclResult_t commShrink(ncclComm* parent, const int* exclude, int nexclude, ncclComm_t* out, const ncclConfig_t* cfg,
                        int flags, const DeferRendezvous& defer);
ncclResult_t commFinalize(ncclComm* comm, const DeferRendezvous& defer);
ncclResult_t commRevoke(ncclComm* comm);
ncclResult_t commDestroy(ncclComm* comm);
ncclResult_t commAbort(ncclComm* comm);
// Frees a communicator whose creation failed (or that a failed
// ncclCommInitAll leaves behind); no rendezvous with other ranks.
void commDiscard(ncclComm* comm);

}  // namespace chorus
