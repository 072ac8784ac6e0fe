// Creating and ending communicators: init from a unique id, init-all, split,
// shrink, finalize, revoke, destroy, abort.
#pragma once

#include "nccl.h"

namespace chorus {

ncclResult_t commInitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* cfg);
ncclResult_t commInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t commSplit(ncclComm* parent, int color, int key, ncclComm_t* out, const ncclConfig_t* cfg);
ncclResult_t commShrink(ncclComm* parent, const int* exclude, int nexclude, ncclComm_t* out, const ncclConfig_t* cfg,
                        int flags);
ncclResult_t commFinalize(ncclComm* comm);
ncclResult_t commRevoke(ncclComm* comm);
ncclResult_t commDestroy(ncclComm* comm);
ncclResult_t commAbort(ncclComm* comm);

}  // namespace chorus
