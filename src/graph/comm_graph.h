// The result of the graph search: which rings, trees and hierarchical groups
// a communicator's collectives follow, and the bandwidth and latency numbers
// the tuner prices them with. A pure value, built once per communicator from
// its CommTopology (graph/search.h) and shared read-only by every plan.
//
// Rings. One ring per channel; ring c visits every rank exactly once. Hosts
// appear in host-index order, and each host contributes one contiguous
// segment: the ring enters the host once (at the segment's first rank, from
// the channel's NIC) and leaves it once (from the segment's last rank, to the
// same NIC). Inside a host the segment follows the order found by the
// intra-host search (NVLink first, fewest CPU-interconnect crossings).
//
// Trees (two per channel, derived from the rings on demand, see trees.h):
// one host: a double binary tree over the host's segment; several hosts: a
// double binary tree over host indices with a chain through each host.
//
// Hierarchical groups (hier.h): with the same number of ranks on every host,
// local position p of every host forms the inter-host ring of position p.
#pragma once

#include <cstdint>
#include <vector>

#include "topo/topology.h"

namespace chorus::graph {

struct RingChannel {
  std::vector<int> order;      // order[p] = rank at ring position p
  std::vector<int> position;   // position[rank] = p (inverse of order)
  std::vector<int> hostStart;  // hostStart[h] = position of host h's first rank in `order`
  std::vector<int> nic;        // nic[h] = NIC node index (in host h's Topology) this channel uses, -1 if none
};

struct CommGraph {
  int nranks = 0;
  int nhosts = 0;
  std::vector<int> hostOfRank;     // host index of every rank
  std::vector<int> ranksOnHost;    // number of ranks on each host
  int ranksPerHost = 0;            // the common count when every host has the same, else 0
  std::vector<RingChannel> rings;  // one per channel; rings.size() channels were found (or replicated)
  int searchedChannels = 0;        // channels the bandwidth supports (before min-channel replication)

  // Per channel, GB/s in one direction: the slowest intra-host hop of a ring
  // (the channel speed of the search), and one NIC's bandwidth (min over hosts).
  double intraBwGBs = 0;
  double nicBwGBs = 0;
  int nicsPerHost = 0;  // fewest NICs on any host (0: none modelled; netBwGBs applies)
  double netBwGBs = 0;  // CommTopology::netBwGBs
  double netLatencyUs = 0;
  topo::PathType typeIntra = topo::PathType::LOC;  // worst path class of an intra-host ring hop
  topo::PathType typeInter = topo::PathType::NET;  // path class between hosts
  topo::PathType typeNic = topo::PathType::LOC;    // worst path class between a ring's end rank and its NIC
  bool cpuDevices = true;                          // ranks run on CPUs (host mode): no GPU in any rank's place

  int nchannels() const { return static_cast<int>(rings.size()); }
  const RingChannel& ring(int channel) const { return rings[static_cast<size_t>(channel) % rings.size()]; }
};

}  // namespace chorus::graph
