#include "topo/comm_topology.h"

#include <algorithm>

namespace chorus::topo {

std::vector<int> CommTopology::ranksOnHost(int host) const {
  std::vector<int> out;
  for (int r = 0; r < nranks(); ++r)
    if (ranks[r].host == host) out.push_back(r);
  return out;
}

PathType CommTopology::pathBetween(int rankA, int rankB) const {
  const RankPlace& a = ranks[rankA];
  const RankPlace& b = ranks[rankB];
  if (a.host != b.host) return PathType::NET;
  if (a.device == b.device) return PathType::LOC;
  const Topology& t = hosts[a.host];
  if (t.paths.size() != t.nodes.size() || a.device < 0 || b.device < 0) return PathType::DIS;
  return t.path(a.device, b.device).type;
}

// Host-mode ranks copy through shared memory, so their bandwidth is capped by
// one rank's memcpy rate whatever the CPU interconnect offers.
double CommTopology::bwBetween(int rankA, int rankB) const {
  const RankPlace& a = ranks[rankA];
  const RankPlace& b = ranks[rankB];
  if (a.host != b.host) return netBwGBs;
  const Topology& t = hosts[a.host];
  if (a.device < 0 || b.device < 0 || t.paths.size() != t.nodes.size()) return 0;
  bool cpuDevices = t.nodes[a.device].type == NodeType::Cpu || t.nodes[b.device].type == NodeType::Cpu;
  double pathBw = a.device == b.device ? bw::kLocal : t.path(a.device, b.device).bwGBs;
  return cpuDevices ? std::min(pathBw, bw::kHostMemcpy) : pathBw;
}

}  // namespace chorus::topo
