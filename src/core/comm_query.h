// Small read-only view of a communicator for code that should not depend on
// the full ncclComm definition (API entry points, device-API host functions).
#pragma once

#include "nccl.h"

namespace chorus {

// ncclSuccess when `comm` is a live communicator created by this library;
// otherwise records "<fn>: ..." via fail() and returns ncclInvalidArgument
// (NULL, destroyed or foreign pointer).
ncclResult_t checkComm(const ncclComm* comm, const char* fn);

int commRank(const ncclComm* comm);
int commNRanks(const ncclComm* comm);
// Number of ranks that share this rank's node, and this rank's index among them.
int commLocalNRanks(const ncclComm* comm);
int commLocalRank(const ncclComm* comm);
// -1 in host mode.
int commCudaDevice(const ncclComm* comm);
bool commIsHostMode(const ncclComm* comm);

}  // namespace chorus
