#include "graph/intra_search.h"

#include <algorithm>
#include <climits>

#include "topo/topology.h"

namespace chorus::graph {

using topo::NodeType;
using topo::PathType;

int hopPenalty(PathType t) {
  switch (t) {
    case PathType::LOC:
    case PathType::NVL:
      return 0;
    case PathType::NVB:
    case PathType::C2C:
      return 1;
    case PathType::PIX:
      return 2;
    case PathType::PXB:
      return 3;
    case PathType::PXN:
    case PathType::PHB:
      return 4;
    case PathType::SYS:
      return 16;
    case PathType::NET:
      return 64;
    case PathType::DIS:
      return 1 << 20;
  }
  return 1 << 20;
}

namespace {

constexpr double kEps = 1e-9;

// Ranks that share a device, in order of first appearance.
struct DeviceGroups {
  std::vector<int> device;                // node index per group
  std::vector<std::vector<int>> members;  // local ranks per group, ascending
};

DeviceGroups groupByDevice(const std::vector<int>& devices) {
  DeviceGroups g;
  for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
    auto it = std::find(g.device.begin(), g.device.end(), devices[i]);
    if (it == g.device.end()) {
      g.device.push_back(devices[i]);
      g.members.push_back({i});
    } else {
      g.members[it - g.device.begin()].push_back(i);
    }
  }
  return g;
}

// What a ring hop consumes: every directed link of its route, and for links
// into an NVSwitch fabric also the GPU's fabric port (egress of the sender,
// ingress of the receiver), because the topology models the fabric as one
// link per GPU pair while all of them share the GPU's NVLinks.
struct Capacity {
  std::vector<double> left;             // links first, then fabric ports
  std::vector<std::vector<int>> extra;  // per link: fabric ports it also uses
};

Capacity initialCapacity(const topo::Topology& t) {
  Capacity c;
  for (const topo::Link& l : t.links) c.left.push_back(l.bwGBs);
  c.extra.resize(t.links.size());
  std::vector<int> egress(t.nodes.size(), -1), ingress(t.nodes.size(), -1);
  auto port = [&](std::vector<int>& ports, int node, double bw) {
    if (ports[node] < 0) {
      ports[node] = static_cast<int>(c.left.size());
      c.left.push_back(bw);
    }
    return ports[node];
  };
  for (size_t i = 0; i < t.links.size(); ++i) {
    const topo::Link& l = t.links[i];
    if (!l.viaNvSwitch) continue;
    c.extra[i].push_back(port(egress, l.from, l.bwGBs));
    c.extra[i].push_back(port(ingress, l.to, l.bwGBs));
  }
  return c;
}

// Depth-first search for one cycle over the groups at a fixed speed, using
// no hop worse than `maxType`.
class CycleSearch {
 public:
  CycleSearch(const HostRoutes& routes, const DeviceGroups& groups, Capacity& capacity, double speed, PathType maxType,
              const std::vector<int>* preferred, long budget)
      : routes_(routes), groups_(groups), capacity_(capacity), speed_(speed), maxType_(maxType), budget_(budget) {
    const int d = static_cast<int>(groups.device.size());
    preferredNext_.assign(d, -1);
    if (preferred != nullptr && static_cast<int>(preferred->size()) == d)
      for (int i = 0; i < d; ++i) preferredNext_[(*preferred)[i]] = (*preferred)[(i + 1) % d];
  }

  // True when a cycle was found; *cycle is a group order starting at group 0.
  bool run(std::vector<int>* cycle, int* penalty) {
    const int d = static_cast<int>(groups_.device.size());
    used_.assign(d, false);
    path_.assign(1, 0);
    used_[0] = true;
    dfs(0);
    if (best_.empty()) return false;
    *cycle = best_;
    *penalty = bestPenalty_;
    return true;
  }

 private:
  const Route& hop(int a, int b) const { return routes_.route(groups_.device[a], groups_.device[b]); }

  bool fits(int a, int b) const {
    const Route& r = hop(a, b);
    if (r.type == PathType::DIS || r.type > maxType_ || r.bwGBs + kEps < speed_) return false;
    for (int l : r.links) {
      if (capacity_.left[l] + kEps < speed_) return false;
      for (int p : capacity_.extra[l])
        if (capacity_.left[p] + kEps < speed_) return false;
    }
    return true;
  }
  void take(int a, int b, double amount) {
    for (int l : hop(a, b).links) {
      capacity_.left[l] -= amount;
      for (int p : capacity_.extra[l]) capacity_.left[p] -= amount;
    }
  }

  bool exhausted() const { return bestPenalty_ == 0 || (nodes_ > budget_ && !best_.empty()); }

  void dfs(int penalty) {
    if (exhausted() || penalty >= bestPenalty_) return;
    ++nodes_;
    const int d = static_cast<int>(groups_.device.size());
    const int u = path_.back();
    if (static_cast<int>(path_.size()) == d) {
      if (!fits(u, 0)) return;
      const int total = penalty + hopPenalty(hop(u, 0).type);
      if (total < bestPenalty_) {
        bestPenalty_ = total;
        best_ = path_;
      }
      return;
    }
    for (int v : candidates(u)) {
      if (!fits(u, v)) continue;
      take(u, v, speed_);
      used_[v] = true;
      path_.push_back(v);
      dfs(penalty + hopPenalty(hop(u, v).type));
      path_.pop_back();
      used_[v] = false;
      take(u, v, -speed_);
      if (exhausted()) return;
    }
  }

  // Unvisited groups, cheapest hop first, the previous channel's successor
  // first among equals, then by index (which keeps rank order on ties).
  std::vector<int> candidates(int u) const {
    std::vector<int> c;
    for (int v = 0; v < static_cast<int>(used_.size()); ++v)
      if (!used_[v]) c.push_back(v);
    std::stable_sort(c.begin(), c.end(), [&](int a, int b) {
      const int pa = hopPenalty(hop(u, a).type), pb = hopPenalty(hop(u, b).type);
      if (pa != pb) return pa < pb;
      return (a == preferredNext_[u]) > (b == preferredNext_[u]);
    });
    return c;
  }

  const HostRoutes& routes_;
  const DeviceGroups& groups_;
  Capacity& capacity_;
  double speed_;
  PathType maxType_;
  long budget_;
  long nodes_ = 0;
  std::vector<int> preferredNext_;
  std::vector<bool> used_;
  std::vector<int> path_;
  std::vector<int> best_;
  int bestPenalty_ = INT_MAX;
};

void subtractCycle(const HostRoutes& routes, const DeviceGroups& g, const std::vector<int>& cycle, double speed,
                   Capacity& capacity) {
  const size_t d = cycle.size();
  if (d < 2) return;
  for (size_t i = 0; i < d; ++i)
    for (int l : routes.route(g.device[cycle[i]], g.device[cycle[(i + 1) % d]]).links) {
      capacity.left[l] -= speed;
      for (int p : capacity.extra[l]) capacity.left[p] -= speed;
    }
}

std::vector<double> candidateSpeeds(const HostRoutes& routes, const DeviceGroups& g, double cap) {
  std::vector<double> speeds;
  const int d = static_cast<int>(g.device.size());
  for (int a = 0; a < d; ++a)
    for (int b = 0; b < d; ++b)
      if (a != b && routes.route(g.device[a], g.device[b]).type != PathType::DIS)
        speeds.push_back(std::min(cap, routes.route(g.device[a], g.device[b]).bwGBs));
  std::sort(speeds.rbegin(), speeds.rend());
  speeds.erase(std::unique(speeds.begin(), speeds.end()), speeds.end());
  return speeds;
}

std::vector<int> expand(const DeviceGroups& g, const std::vector<int>& cycle) {
  std::vector<int> ranks;
  for (int grp : cycle) ranks.insert(ranks.end(), g.members[grp].begin(), g.members[grp].end());
  return ranks;
}

PathType worse(PathType a, PathType b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

PathType worstGroupHop(const HostRoutes& routes, const DeviceGroups& g, const std::vector<int>& cycle) {
  PathType w = PathType::LOC;
  for (size_t i = 0; i < cycle.size() && cycle.size() > 1; ++i)
    w = worse(w, routes.route(g.device[cycle[i]], g.device[cycle[(i + 1) % cycle.size()]]).type);
  return w;
}

PathType worstHop(const HostRoutes& routes, const std::vector<int>& devices, const std::vector<int>& ring) {
  PathType w = PathType::LOC;
  for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i)
    w = worse(w, routes.route(devices[ring[i]], devices[ring[(i + 1) % ring.size()]]).type);
  return w;
}

// Rotates `ring` so that it enters next to `nic` and leaves next to it.
std::vector<int> cutNearNic(const HostRoutes& routes, const std::vector<int>& devices, const std::vector<int>& ring,
                            int nic, PathType* nicType) {
  const int n = static_cast<int>(ring.size());
  // Widest, then cheapest; on a tie the entry nearest the NIC (with one NIC
  // per GPU only one end can share its switch: received data lands there).
  int bestCut = 0, bestPen = INT_MAX, bestInPen = INT_MAX;
  double bestBw = -1;
  for (int i = 0; i < n; ++i) {
    const Route& in = routes.route(nic, devices[ring[i]]);
    const Route& out = routes.route(devices[ring[(i + n - 1) % n]], nic);
    const double bw = std::min(in.bwGBs, out.bwGBs);
    const int inPen = hopPenalty(in.type), pen = inPen + hopPenalty(out.type);
    const bool sameBw = bw > bestBw - kEps && bw < bestBw + kEps;
    if (bw > bestBw + kEps || (sameBw && (pen < bestPen || (pen == bestPen && inPen < bestInPen)))) {
      bestBw = bw;
      bestPen = pen;
      bestInPen = inPen;
      bestCut = i;
    }
  }
  std::vector<int> seg(ring.begin() + bestCut, ring.end());
  seg.insert(seg.end(), ring.begin(), ring.begin() + bestCut);
  *nicType = worse(routes.route(nic, devices[seg.front()]).type, routes.route(devices[seg.back()], nic).type);
  return seg;
}

}  // namespace

HostRings searchHost(const topo::Topology& topo, const HostRoutes& routes, const std::vector<int>& devices,
                     const IntraOptions& opts) {
  HostRings out;
  const DeviceGroups groups = groupByDevice(devices);
  const int maxChannels = std::max(1, opts.maxChannels);
  std::vector<std::vector<int>> cycles;  // group orders, one per channel
  if (groups.device.size() <= 1) {
    out.speedGBs = opts.channelCapGBs;
    cycles.assign(maxChannels, std::vector<int>(groups.device.size(), 0));
  } else {
    Capacity capacity;
    std::vector<int> cycle;
    int penalty = 0;
    for (double speed : candidateSpeeds(routes, groups, opts.channelCapGBs)) {
      capacity = initialCapacity(topo);
      CycleSearch search(routes, groups, capacity, speed, PathType::NET, nullptr, opts.budget);
      if (search.run(&cycle, &penalty)) {
        out.speedGBs = speed;
        break;
      }
    }
    if (out.speedGBs <= 0) {  // disconnected: rank order, no bandwidth
      std::vector<int> order(groups.device.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      cycles.push_back(order);
    } else {
      // Further channels at the same speed and no worse path class than the
      // first (an NVLink machine does not add PCIe rings).
      const PathType firstWorst = worstGroupHop(routes, groups, cycle);
      cycles.push_back(cycle);
      subtractCycle(routes, groups, cycle, out.speedGBs, capacity);
      while (static_cast<int>(cycles.size()) < maxChannels) {
        CycleSearch next(routes, groups, capacity, out.speedGBs, firstWorst, &cycles.back(), opts.budget);
        if (!next.run(&cycle, &penalty)) break;
        cycles.push_back(cycle);
        subtractCycle(routes, groups, cycle, out.speedGBs, capacity);
      }
    }
  }
  std::vector<int> nicNodes;
  for (size_t i = 0; i < topo.nodes.size(); ++i)
    if (topo.nodes[i].type == NodeType::Nic) nicNodes.push_back(static_cast<int>(i));
  for (size_t c = 0; c < cycles.size(); ++c) {
    std::vector<int> ring = expand(groups, cycles[c]);
    out.worstType = worse(out.worstType, worstHop(routes, devices, ring));
    if (nicNodes.empty() || !opts.useNics) {
      out.segments.push_back(ring);
      out.nics.push_back(nicNodes.empty() ? -1 : nicNodes[c % nicNodes.size()]);
      continue;
    }
    const int nic = nicNodes[c % nicNodes.size()];
    PathType nicType = PathType::LOC;
    out.segments.push_back(cutNearNic(routes, devices, ring, nic, &nicType));
    out.nics.push_back(nic);
    out.nicType = worse(out.nicType, nicType);
  }
  return out;
}

}  // namespace chorus::graph
