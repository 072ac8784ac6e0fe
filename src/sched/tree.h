// Double binary tree.
//
// A single binary tree all-reduce has logarithmic depth (good latency) but its
// leaves only send and its root only receives, so half the links idle. Two
// trees fix that: tree 0 is a heap-ordered binary tree over ranks 0..n-1
// (parent of position i is (i-1)/2), tree 1 is the same shape over the ranks
// in reverse order. In a heap of n nodes the interior positions are the first
// floor(n/2); reversing the order turns them into leaves, so (almost) every
// rank is interior in exactly one tree. Each tree carries half of the data:
// reduce up the tree (children -> parent) then broadcast down. Depth is
// floor(log2 n), so latency grows with log n instead of n as on a ring.
#pragma once

#include "sched/chunking.h"

namespace chorus::sched {

struct TreeLinks {
  int parent = -1;     // -1 at the root
  int children[2] = {-1, -1};
  int nChildren = 0;
};

CHORUS_SCHED_FN int treeRankAt(int position, int nranks, int tree) {
  return tree == 0 ? position : nranks - 1 - position;
}
CHORUS_SCHED_FN int treePositionOf(int rank, int nranks, int tree) {
  return tree == 0 ? rank : nranks - 1 - rank;
}

CHORUS_SCHED_FN TreeLinks treeLinks(int rank, int nranks, int tree) {
  TreeLinks t;
  const int pos = treePositionOf(rank, nranks, tree);
  if (pos > 0) t.parent = treeRankAt((pos - 1) / 2, nranks, tree);
  for (int c = 0; c < 2; ++c) {
    const int childPos = 2 * pos + 1 + c;
    if (childPos < nranks) t.children[t.nChildren++] = treeRankAt(childPos, nranks, tree);
  }
  return t;
}

CHORUS_SCHED_FN int treeRoot(int nranks, int tree) { return treeRankAt(0, nranks, tree); }

// Number of edges on the longest root-to-leaf path.
CHORUS_SCHED_FN int treeDepth(int nranks) {
  int depth = 0;
  for (int last = nranks - 1; last > 0; last = (last - 1) / 2) ++depth;
  return depth;
}

}  // namespace chorus::sched
