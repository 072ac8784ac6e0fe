// A communicator's view of the machines it spans: one Topology per distinct
// host (ranks with equal PeerInfo::hostHash share a host) and, for every
// rank, where it sits. Built once at communicator init (after the PeerInfo
// exchange) and handed to the graph search (topo/search.h) and the tuner.
#pragma once

#include <cstdint>
#include <vector>

#include "topo/topology.h"

namespace chorus::topo {

struct RankPlace {
  int host = -1;      // index into CommTopology::hosts
  int device = -1;    // node index in hosts[host]: the rank's GPU, or in host mode its CPU (NUMA) node
  int localRank = 0;  // position among the ranks of its host (rank order)
};

struct CommTopology {
  std::vector<Topology> hosts;
  std::vector<uint64_t> hostHashes;  // parallel to hosts
  std::vector<RankPlace> ranks;      // indexed by communicator rank
  // Between hosts: the network. Per-host NIC bandwidth comes from the hosts'
  // NIC nodes; these are what the tuner assumes for one inter-host hop.
  double netBwGBs = 12.5;  // default 100 Gb/s
  double netLatencyUs = 5.0;

  int nhosts() const { return static_cast<int>(hosts.size()); }
  int nranks() const { return static_cast<int>(ranks.size()); }
  // Ranks on `host`, in rank order.
  std::vector<int> ranksOnHost(int host) const;
  // Path class between two ranks: NET across hosts, else the host's path between their devices.
  PathType pathBetween(int rankA, int rankB) const;
  double bwBetween(int rankA, int rankB) const;
};

}  // namespace chorus::topo
