// Who a rank talks to in the graph's trees and hierarchical groups, derived
// from the channel's ring (graph/comm_graph.h) on demand, so a CommGraph of
// 8192 ranks stores rings only.
//
// Trees (tree 0 and tree 1 of a channel). One host: the double binary tree of
// sched/tree.h over the positions of the host's ring segment. Several hosts:
// the double binary tree over host indices, and inside each host a chain
// along the ring segment (position 0 at the top). A host's k-th child host
// (k = 0, 1) hangs its chain top under the parent host's chain position
// min(k, G-1), so no rank has more than two children (the chain's next rank
// and at most one child host) and each host level adds at most two hops.
//
// Hierarchical groups (AllReduce "hier", when every host has G ranks): the
// local ring is the host's segment closed into a cycle; the inter-host ring
// of local position p joins position p of every host, in host order.
#pragma once

#include "graph/comm_graph.h"
#include "sched/tree.h"

namespace chorus::graph {

sched::TreeLinks treeLinks(const CommGraph& g, int channel, int tree, int rank);

// Number of rank-to-rank edges from `rank` up to its tree's root.
int treeDepthOf(const CommGraph& g, int channel, int tree, int rank);

struct HierLinks {
  int localPos = 0, localSize = 1, localNext = -1, localPrev = -1;
  int interPos = 0, interSize = 1, interNext = -1, interPrev = -1;
};

// True when hierarchical groups exist: every host holds the same number of ranks.
bool hierSupported(const CommGraph& g);
HierLinks hierLinks(const CommGraph& g, int channel, int rank);

}  // namespace chorus::graph
