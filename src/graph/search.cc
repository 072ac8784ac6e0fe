#include "graph/search.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "core/params.h"
#include "core/result.h"
#include "graph/intra_search.h"
#include "graph/routes.h"

namespace chorus::graph {
namespace {

using topo::NodeType;
using topo::PathType;

// One GPU-driven channel moves about one NVLink's worth; a host-mode channel a memcpy.
constexpr double kGpuChannelCapGBs = 20.0;

PathType worse(PathType a, PathType b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

ncclResult_t validate(const topo::CommTopology& t) {
  if (t.ranks.empty()) return fail(ncclInvalidArgument, "graph search: the topology places no rank");
  for (size_t r = 0; r < t.ranks.size(); ++r) {
    const topo::RankPlace& p = t.ranks[r];
    if (p.host < 0 || p.host >= t.nhosts())
      return fail(ncclInvalidArgument, "graph search: rank %zu is on host %d of %d", r, p.host, t.nhosts());
    const int nodes = static_cast<int>(t.hosts[p.host].nodes.size());
    if (p.device < 0 || p.device >= nodes)
      return fail(ncclInvalidArgument, "graph search: rank %zu has device node %d but host %d has %d nodes", r,
                  p.device, p.host, nodes);
  }
  return ncclSuccess;
}

// What makes two hosts search alike: nodes, links and where the ranks sit.
std::string shapeKey(const topo::Topology& t, const std::vector<int>& devices) {
  std::string key;
  char buf[96];
  for (const topo::Node& n : t.nodes) {
    snprintf(buf, sizeof(buf), "n%d,%d,%g;", static_cast<int>(n.type), n.numa, n.speedGBs);
    key += buf;
  }
  for (const topo::Link& l : t.links) {
    snprintf(buf, sizeof(buf), "l%d,%d,%d,%g;", l.from, l.to, static_cast<int>(l.type), l.bwGBs);
    key += buf;
  }
  bool havePaths = !t.paths.empty();
  key += havePaths ? "P" : "p";
  for (int d : devices) key += "d" + std::to_string(d);
  return key;
}

struct HostShape {
  HostRings rings;
  bool cpu = true;  // every device of the host is a CPU
};

HostShape searchShape(const topo::Topology& t, const std::vector<int>& devices, bool multiHost,
                      const SearchOptions& opts) {
  HostShape s;
  for (int d : devices) s.cpu &= t.nodes[d].type == NodeType::Cpu;
  IntraOptions io;
  io.maxChannels = std::clamp(opts.maxChannels, 1, 32);
  io.channelCapGBs = s.cpu ? topo::bw::kHostMemcpy : kGpuChannelCapGBs;
  io.budget = opts.budget;
  io.useNics = multiHost;
  HostRoutes routes(t);
  s.rings = searchHost(t, routes, devices, io);
  return s;
}

double hostNicBw(const topo::Topology& t, double netBw) {
  double bw = 0;
  for (const topo::Node& n : t.nodes)
    if (n.type == NodeType::Nic && n.speedGBs > 0) bw = bw == 0 ? n.speedGBs : std::min(bw, n.speedGBs);
  return bw > 0 ? bw : netBw;
}

int countNics(const topo::Topology& t) {
  int n = 0;
  for (const topo::Node& node : t.nodes) n += node.type == NodeType::Nic;
  return n;
}

void buildRings(const std::vector<std::vector<int>>& hostRanks, const std::vector<const HostShape*>& shapeOf,
                int nchannels, CommGraph* g) {
  for (int c = 0; c < nchannels; ++c) {
    RingChannel ring;
    ring.position.assign(g->nranks, -1);
    for (int h = 0; h < g->nhosts; ++h) {
      const HostRings& hr = shapeOf[h]->rings;
      const int local = c % hr.channels();
      ring.hostStart.push_back(static_cast<int>(ring.order.size()));
      ring.nic.push_back(hr.nics[local]);
      for (int i : hr.segments[local]) {
        const int rank = hostRanks[h][i];
        ring.position[rank] = static_cast<int>(ring.order.size());
        ring.order.push_back(rank);
      }
    }
    g->rings.push_back(std::move(ring));
  }
}

}  // namespace

SearchOptions searchOptionsFromEnv() {
  SearchOptions o;
  int64_t lo = std::max<int64_t>(params::minChannels(), params::minCtas());
  int64_t hi = 32;
  if (params::maxChannels() > 0) hi = std::min<int64_t>(hi, params::maxChannels());
  if (params::maxCtas() > 0) hi = std::min<int64_t>(hi, params::maxCtas());
  o.maxChannels = static_cast<int>(std::max<int64_t>(1, hi));
  o.minChannels = static_cast<int>(std::clamp<int64_t>(lo, 1, 32));
  return o;
}

ncclResult_t searchGraph(const topo::CommTopology& topo, const SearchOptions& opts, CommGraph* out) {
  CHORUS_CHECK(validate(topo));
  CommGraph g;
  g.nranks = topo.nranks();
  g.nhosts = topo.nhosts();
  g.netBwGBs = topo.netBwGBs;
  g.netLatencyUs = topo.netLatencyUs;
  std::vector<std::vector<int>> hostRanks(g.nhosts), hostDevices(g.nhosts);
  for (int r = 0; r < g.nranks; ++r) {
    g.hostOfRank.push_back(topo.ranks[r].host);
    hostRanks[topo.ranks[r].host].push_back(r);
    hostDevices[topo.ranks[r].host].push_back(topo.ranks[r].device);
  }
  for (int h = 0; h < g.nhosts; ++h) {
    if (hostRanks[h].empty()) return fail(ncclInvalidArgument, "graph search: host %d has no rank", h);
    g.ranksOnHost.push_back(static_cast<int>(hostRanks[h].size()));
  }
  const bool uniform =
      std::all_of(g.ranksOnHost.begin(), g.ranksOnHost.end(), [&](int n) { return n == g.ranksOnHost[0]; });
  g.ranksPerHost = uniform ? g.ranksOnHost[0] : 0;

  std::map<std::string, HostShape> shapes;
  std::vector<const HostShape*> shapeOf(g.nhosts);
  for (int h = 0; h < g.nhosts; ++h) {
    std::string key = shapeKey(topo.hosts[h], hostDevices[h]);
    auto it = shapes.find(key);
    if (it == shapes.end())
      it = shapes.emplace(key, searchShape(topo.hosts[h], hostDevices[h], g.nhosts > 1, opts)).first;
    shapeOf[h] = &it->second;
  }

  int found = opts.maxChannels;
  g.intraBwGBs = 1e30;
  g.cpuDevices = true;
  for (auto& [key, s] : shapes) {
    found = std::min(found, s.rings.channels());
    g.intraBwGBs = std::min(g.intraBwGBs, s.rings.speedGBs);
    g.typeIntra = worse(g.typeIntra, s.rings.worstType);
    g.typeNic = worse(g.typeNic, s.rings.nicType);
    g.cpuDevices &= s.cpu;
  }
  found = std::max(1, found);
  g.searchedChannels = found;
  g.nicBwGBs = 1e30;
  g.nicsPerHost = 1 << 30;
  for (int h = 0; h < g.nhosts; ++h) {
    g.nicBwGBs = std::min(g.nicBwGBs, hostNicBw(topo.hosts[h], topo.netBwGBs));
    g.nicsPerHost = std::min(g.nicsPerHost, countNics(topo.hosts[h]));
  }
  g.typeInter = g.nhosts > 1 ? PathType::NET : PathType::LOC;
  buildRings(hostRanks, shapeOf, std::max(found, std::min(opts.minChannels, 32)), &g);
  *out = std::move(g);
  CHORUS_INFO(kLogGraph,
              "graph: %d ranks on %d hosts (%zu host shapes): %d channels found, %d used, %.1f GB/s "
              "per channel intra (%s), NIC %.1f GB/s x %d",
              out->nranks, out->nhosts, shapes.size(), found, out->nchannels(), out->intraBwGBs,
              topo::pathTypeName(out->typeIntra), out->nicBwGBs, out->nicsPerHost);
  return ncclSuccess;
}

}  // namespace chorus::graph
