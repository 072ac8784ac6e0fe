// Routes between the nodes of one host, as the search needs them: the path
// class, the bottleneck bandwidth, and the directed links the path uses (so
// that a channel's bandwidth can be subtracted from every link it crosses).
//
// When the Topology carries computed paths (Topology::computePaths) they are
// used as they are; otherwise the widest paths are computed here: a Dijkstra
// variant that maximises the bottleneck bandwidth (fewer hops on ties) and,
// like NCCL, never routes through a NIC, nor through a GPU except from one
// NVLink to another.
#pragma once

#include <vector>

#include "topo/topology.h"

namespace chorus::graph {

struct Route {
  topo::PathType type = topo::PathType::DIS;
  double bwGBs = 0;
  std::vector<int> links;  // indices into Topology::links, source to destination
};

class HostRoutes {
 public:
  explicit HostRoutes(const topo::Topology& t);
  const Route& route(int from, int to) const { return routes_[static_cast<size_t>(from) * n_ + to]; }
  int nodes() const { return n_; }

 private:
  void fromTopologyPaths(const topo::Topology& t);
  void computeWidest(const topo::Topology& t, int source);
  static topo::PathType classify(const topo::Topology& t, int from, const std::vector<int>& links);

  int n_ = 0;
  std::vector<Route> routes_;  // n_ x n_
};

// Bandwidth of a path between two ranks on the same device (shared memory or
// the same GPU): effectively unlimited for the search.
inline constexpr double kLocalBwGBs = 1e6;

}  // namespace chorus::graph
