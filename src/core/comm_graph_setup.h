// Builds a communicator's CommGraph at init (graph/search.h) and writes
// NCCL_GRAPH_DUMP_FILE. The topology is the communicator's discovered
// CommTopology when it has one, else the ranks' host identities (one CPU
// per host), which already gives multi-host rings and hierarchical groups.
#pragma once

#include "nccl.h"

struct ncclComm;

namespace chorus {

ncclResult_t setupCommGraph(ncclComm* comm);

}  // namespace chorus
