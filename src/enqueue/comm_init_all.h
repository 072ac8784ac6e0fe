// ncclCommInitAll: one communicator over ndev ranks of this process, created
// as a group of commInitRank calls so that one thread drives them all.
#pragma once

#include "nccl.h"

namespace chorus {

// In GPU mode rank r belongs to devlist[r] (default: device r); a devlist may
// repeat a device to put several ranks on one GPU. Must not be called inside
// a group. On failure every entry of comms is null.
ncclResult_t commInitAll(ncclComm_t* comms, int ndev, const int* devlist);

}  // namespace chorus
