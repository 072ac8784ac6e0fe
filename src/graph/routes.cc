#include "graph/routes.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace chorus::graph {

using topo::LinkType;
using topo::NodeType;
using topo::PathType;

HostRoutes::HostRoutes(const topo::Topology& t) : n_(static_cast<int>(t.nodes.size())) {
  routes_.resize(static_cast<size_t>(n_) * n_);
  for (int a = 0; a < n_; ++a) {
    Route& self = routes_[static_cast<size_t>(a) * n_ + a];
    self.type = PathType::LOC;
    self.bwGBs = kLocalBwGBs;
  }
  const bool havePaths = static_cast<int>(t.paths.size()) == n_ &&
                         std::all_of(t.paths.begin(), t.paths.end(), [&](auto& row) { return (int)row.size() == n_; });
  if (havePaths) {
    fromTopologyPaths(t);
    return;
  }
  for (int a = 0; a < n_; ++a) computeWidest(t, a);
}

void HostRoutes::fromTopologyPaths(const topo::Topology& t) {
  // Best link per ordered node pair, to turn node hops into link indices.
  std::vector<std::vector<std::pair<int, int>>> out(n_);  // from -> (to, link)
  for (size_t l = 0; l < t.links.size(); ++l) {
    const topo::Link& k = t.links[l];
    if (k.from < 0 || k.from >= n_ || k.to < 0 || k.to >= n_) continue;
    auto& row = out[k.from];
    auto it = std::find_if(row.begin(), row.end(), [&](auto& e) { return e.first == k.to; });
    if (it == row.end())
      row.emplace_back(k.to, static_cast<int>(l));
    else if (t.links[it->second].bwGBs < k.bwGBs)
      it->second = static_cast<int>(l);
  }
  for (int a = 0; a < n_; ++a)
    for (int b = 0; b < n_; ++b) {
      if (a == b) continue;
      const topo::Path& p = t.paths[a][b];
      Route& r = routes_[static_cast<size_t>(a) * n_ + b];
      r.type = p.type;
      r.bwGBs = p.bwGBs;
      for (size_t i = 0; i + 1 < p.hops.size(); ++i) {
        const int u = p.hops[i], v = p.hops[i + 1];
        if (u < 0 || u >= n_) continue;
        for (auto& e : out[u])
          if (e.first == v) r.links.push_back(e.second);
      }
    }
}

void HostRoutes::computeWidest(const topo::Topology& t, int source) {
  struct Best {
    double bw = -1;
    int hops = 0;
    int viaLink = -1;  // link used to arrive
  };
  std::vector<Best> best(n_);
  best[source].bw = kLocalBwGBs;
  // Max-heap on bandwidth, then fewer hops.
  using Item = std::tuple<double, int, int>;  // bw, -hops, node
  std::priority_queue<Item> queue;
  queue.emplace(kLocalBwGBs, 0, source);
  std::vector<bool> done(n_, false);
  while (!queue.empty()) {
    auto [bw, negHops, u] = queue.top();
    queue.pop();
    if (done[u]) continue;
    done[u] = true;
    const bool endpointOnly = u != source && (t.nodes[u].type == NodeType::Nic || t.nodes[u].type == NodeType::Gpu);
    for (size_t l = 0; l < t.links.size(); ++l) {
      const topo::Link& k = t.links[l];
      if (k.from != u || k.to < 0 || k.to >= n_ || done[k.to]) continue;
      if (endpointOnly) {
        // Only GPUs forward, and only NVLink to NVLink (NCCL's NVB paths).
        const int in = best[u].viaLink;
        if (t.nodes[u].type != NodeType::Gpu || k.type != LinkType::NvLink || in < 0 ||
            t.links[in].type != LinkType::NvLink)
          continue;
      }
      const double nbw = std::min(bw, k.bwGBs);
      const int nhops = -negHops + 1;
      Best& b = best[k.to];
      if (nbw > b.bw || (nbw == b.bw && nhops < b.hops)) {
        b = Best{nbw, nhops, static_cast<int>(l)};
        queue.emplace(nbw, -nhops, k.to);
      }
    }
  }
  for (int d = 0; d < n_; ++d) {
    if (d == source || best[d].viaLink < 0) continue;
    Route& r = routes_[static_cast<size_t>(source) * n_ + d];
    for (int v = d; v != source;) {
      const int l = best[v].viaLink;
      r.links.push_back(l);
      v = t.links[l].from;
    }
    std::reverse(r.links.begin(), r.links.end());
    r.bwGBs = best[d].bw;
    r.type = classify(t, source, r.links);
  }
}

PathType HostRoutes::classify(const topo::Topology& t, int from, const std::vector<int>& links) {
  bool allNvLink = true, smp = false, net = false, c2c = false, viaCpu = false;
  int switches = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    const topo::Link& k = t.links[links[i]];
    allNvLink &= k.type == LinkType::NvLink;
    smp |= k.type == LinkType::Smp;
    net |= k.type == LinkType::Net;
    c2c |= k.type == LinkType::C2C;
    if (i + 1 < links.size()) {  // intermediate node
      const NodeType mid = t.nodes[k.to].type;
      viaCpu |= mid == NodeType::Cpu;
      switches += mid == NodeType::PciSwitch;
    }
  }
  (void)from;
  if (net) return PathType::NET;
  if (smp) return PathType::SYS;
  if (allNvLink) return links.size() == 1 ? PathType::NVL : PathType::NVB;
  if (c2c) return PathType::C2C;
  if (viaCpu) return PathType::PHB;
  return switches <= 1 ? PathType::PIX : PathType::PXB;
}

}  // namespace chorus::graph
