#include "graph/links.h"

#include <algorithm>

namespace chorus::graph {
namespace {

void addChild(sched::TreeLinks& t, int rank) {
  if (t.nChildren < 2) t.children[t.nChildren++] = rank;
}

// Which child (0 or 1) `host` is of its parent host in `tree`.
int childIndex(int host, int parentHost, int nhosts, int tree) {
  const sched::TreeLinks p = sched::treeLinks(parentHost, nhosts, tree);
  return p.nChildren > 1 && p.children[1] == host ? 1 : 0;
}

}  // namespace

sched::TreeLinks treeLinks(const CommGraph& g, int channel, int tree, int rank) {
  const RingChannel& ring = g.ring(channel);
  const int host = g.hostOfRank[rank];
  const int start = ring.hostStart[host];
  const int size = g.ranksOnHost[host];
  const int pos = ring.position[rank] - start;
  sched::TreeLinks out;
  if (g.nhosts == 1) {
    const sched::TreeLinks local = sched::treeLinks(pos, size, tree);
    out.parent = local.parent < 0 ? -1 : ring.order[start + local.parent];
    for (int i = 0; i < local.nChildren; ++i) addChild(out, ring.order[start + local.children[i]]);
    return out;
  }
  const sched::TreeLinks hosts = sched::treeLinks(host, g.nhosts, tree);
  if (pos > 0) {
    out.parent = ring.order[start + pos - 1];
  } else if (hosts.parent >= 0) {
    const int k = childIndex(host, hosts.parent, g.nhosts, tree);
    const int attach = std::min(k, g.ranksOnHost[hosts.parent] - 1);
    out.parent = ring.order[ring.hostStart[hosts.parent] + attach];
  }
  if (pos + 1 < size) addChild(out, ring.order[start + pos + 1]);
  for (int k = 0; k < hosts.nChildren; ++k)
    if (std::min(k, size - 1) == pos) addChild(out, ring.order[ring.hostStart[hosts.children[k]]]);
  return out;
}

int treeDepthOf(const CommGraph& g, int channel, int tree, int rank) {
  int depth = 0;
  for (int r = treeLinks(g, channel, tree, rank).parent; r >= 0 && depth <= g.nranks;
       r = treeLinks(g, channel, tree, r).parent)
    ++depth;
  return depth;
}

bool hierSupported(const CommGraph& g) { return g.ranksPerHost > 0 && g.nranks > 0; }

HierLinks hierLinks(const CommGraph& g, int channel, int rank) {
  const RingChannel& ring = g.ring(channel);
  const int host = g.hostOfRank[rank];
  const int G = g.ranksPerHost;
  const int start = ring.hostStart[host];
  HierLinks h;
  h.localSize = G;
  h.localPos = ring.position[rank] - start;
  h.localNext = ring.order[start + (h.localPos + 1) % G];
  h.localPrev = ring.order[start + (h.localPos + G - 1) % G];
  h.interSize = g.nhosts;
  h.interPos = host;
  h.interNext = ring.order[ring.hostStart[(host + 1) % g.nhosts] + h.localPos];
  h.interPrev = ring.order[ring.hostStart[(host + g.nhosts - 1) % g.nhosts] + h.localPos];
  return h;
}

}  // namespace chorus::graph
