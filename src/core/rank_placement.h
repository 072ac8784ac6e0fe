// Where a rank sits among its communicator's ranks: on its host (the
// transports' view, NCCL_HOSTID included) and on its machine (the kernel
// whose CPUs it shares, host_identity.h's machineHash).
#pragma once

#include <vector>

#include "transport/transport.h"

namespace chorus {

struct RankPlacement {
  int localRank = 0;       // this rank's index among its host's ranks
  int localNRanks = 1;     // ranks on its host
  int machineNRanks = 1;   // ranks on its machine: every "host" that shares its CPUs
  int mostHostNRanks = 1;  // ranks on the host that holds the most (the same on every rank)
};

// `peers` holds every rank's record, `mine` among them.
RankPlacement placeRank(const std::vector<PeerInfo>& peers, const PeerInfo& mine);

}  // namespace chorus
