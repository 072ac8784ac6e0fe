// The intra-host search: in which order a ring visits the ranks of one host,
// how many channels the host's links sustain, and where each channel's ring
// enters and leaves the host (which NIC, which rank).
//
// Algorithm. Ranks sharing a device (several host-mode ranks on one NUMA
// node, several ranks on one GPU) are grouped and always visited back to
// back, so the search runs over distinct devices. For each candidate channel
// speed S, highest first (the distinct route bandwidths, capped at what one
// channel can move), a depth-first search looks for a Hamiltonian cycle over
// the devices in which every hop's route has S GB/s left on each of its
// directed links, counting earlier hops of the same cycle. Among feasible
// cycles it keeps the one with the lowest penalty (NVLink hops cost nothing,
// PCIe hops a little, CPU-interconnect crossings a lot), which is what keeps a
// two-socket ring at two crossings. The first speed with a cycle is the
// channel speed; then S is subtracted from every link the cycle uses and the
// search repeats (preferring the previous channel's cycle, and allowing no
// hop of a worse path class than the first cycle's worst) until no cycle fits
// or the channel limit is reached: the number of successes is the number of
// channels the bandwidth supports (more NVLinks, more channels). Links into
// an NVSwitch fabric (one link per GPU pair in the Topology) also draw on
// the GPU's fabric port, so an 8-GPU NVSwitch box with 18 NVLinks per GPU
// sustains 18 channels of 20 GB/s, not one per pair. A node budget
// bounds the search on large hosts; the best cycle found so far is used.
//
// NIC assignment. Channel c uses NIC c mod (number of NICs). The cycle is cut
// at the edge whose ends are nearest that NIC (the widest, then cheapest
// routes NIC -> entry rank and exit rank -> NIC), so on machines with one NIC
// per GPU pair the ring enters and leaves next to its NIC. Hosts of the same
// shape make the same choices, so channel c uses the same NIC index and the
// same local ranks on every host: the rings are rail-aligned.
#pragma once

#include <vector>

#include "graph/routes.h"
#include "topo/topology.h"

namespace chorus::graph {

struct IntraOptions {
  int maxChannels = 32;
  double channelCapGBs = 20;  // the most one channel moves (GPU: about one NVLink; host mode: a memcpy)
  long budget = 200000;       // DFS nodes per search before settling for the best cycle found
  bool useNics = true;        // cut rings next to NICs (only matters when the ring leaves the host)
};

struct HostRings {
  double speedGBs = 0;                             // per channel
  topo::PathType worstType = topo::PathType::LOC;  // of a ring hop
  topo::PathType nicType = topo::PathType::LOC;    // worst route between a NIC and the rank next to it
  // Per channel: local rank indices (0..G-1, in the host's rank order) in
  // segment order (entry first, exit last), and the NIC node used (-1: none).
  std::vector<std::vector<int>> segments;
  std::vector<int> nics;
  int channels() const { return static_cast<int>(segments.size()); }
};

// `devices[i]` is the node index of local rank i. Never fails: a host whose
// devices cannot be joined at any speed gets a rank-order ring with speed 0.
HostRings searchHost(const topo::Topology& topo, const HostRoutes& routes, const std::vector<int>& devices,
                     const IntraOptions& opts);

// Cost the search assigns to a hop of the given path class.
int hopPenalty(topo::PathType t);

}  // namespace chorus::graph
