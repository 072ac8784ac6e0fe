// NCCL_GRAPH_DUMP_FILE: the rings and trees of one host, in the spirit of
// NCCL's graph dump (format described in docs/topology.md).
#include <cstdio>
#include <string>

#include "graph/links.h"
#include "graph/search.h"

namespace chorus::graph {
namespace {

// NCCL's pattern numbers: 3 = tree (chain inside the host), 4 = ring.
constexpr int kPatternTree = 3;
constexpr int kPatternRing = 4;

std::string fmt(const char* f, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string deviceElement(const topo::Topology& t, int node, int rank) {
  const topo::Node& n = t.nodes[node];
  if (n.type == topo::NodeType::Gpu)
    return "<gpu dev=\"" + std::to_string(n.cudaDev >= 0 ? n.cudaDev : n.index) + "\" rank=\"" + std::to_string(rank) +
           "\"/>";
  return "<cpu dev=\"" + std::to_string(n.numa >= 0 ? n.numa : n.index) + "\" rank=\"" + std::to_string(rank) + "\"/>";
}

std::string netElement(const topo::Topology& t, int nic) {
  if (nic < 0) return "";
  return "      <net dev=\"" + std::to_string(t.nodes[nic].index) + "\"/>\n";
}

std::string graphElement(const topo::CommTopology& topo, const CommGraph& g, int host, int id, int pattern) {
  const topo::Topology& t = topo.hosts[host];
  const bool multi = g.nhosts > 1;
  std::string s = "  <graph id=\"" + std::to_string(id) + "\" pattern=\"" + std::to_string(pattern) +
                  "\" nchannels=\"" + std::to_string(g.nchannels()) + "\" speedintra=\"" + fmt("%g", g.intraBwGBs) +
                  "\" speedinter=\"" + fmt("%g", multi ? g.nicBwGBs : g.intraBwGBs) + "\" typeintra=\"" +
                  topo::pathTypeName(g.typeIntra) + "\" typeinter=\"" +
                  topo::pathTypeName(multi ? g.typeInter : g.typeIntra) + "\" host=\"" + std::to_string(host) +
                  "\" nhosts=\"" + std::to_string(g.nhosts) + "\" nranks=\"" + std::to_string(g.nranks) + "\">\n";
  for (int c = 0; c < g.nchannels(); ++c) {
    const RingChannel& ring = g.ring(c);
    s += "    <channel>\n";
    if (multi) s += netElement(t, ring.nic[host]);
    for (int i = 0; i < g.ranksOnHost[host]; ++i) {
      const int rank = ring.order[ring.hostStart[host] + i];
      s += "      " + deviceElement(t, topo.ranks[rank].device, rank) + "\n";
    }
    if (multi) s += netElement(t, ring.nic[host]);
    s += "    </channel>\n";
  }
  return s + "  </graph>\n";
}

}  // namespace

std::string graphToXml(const topo::CommTopology& topo, const CommGraph& g, int rank) {
  const int host = rank >= 0 && rank < g.nranks ? g.hostOfRank[rank] : 0;
  std::string s = "<graphs version=\"1\">\n";
  s += graphElement(topo, g, host, 0, kPatternRing);
  s += graphElement(topo, g, host, 1, kPatternTree);
  return s + "</graphs>\n";
}

}  // namespace chorus::graph
