// Double binary tree (src/sched/tree.h): structural properties for every
// rank count up to 64 — each tree is a spanning tree with mutual links, its
// depth is floor(log2 n), and no rank is interior in both trees (so each
// rank's send bandwidth is used by at most one tree's reduce phase).
#include "sched/tree.h"

#include <gtest/gtest.h>

#include <vector>

namespace chorus::sched {
namespace {

constexpr int kMaxRanks = 64;

int floorLog2(int n) {
  int d = 0;
  while ((1 << (d + 1)) <= n) ++d;
  return d;
}

TEST(SchedTree, PositionsAreABijection) {
  for (int n = 1; n <= kMaxRanks; ++n)
    for (int tree = 0; tree < 2; ++tree) {
      std::vector<int> seen(static_cast<size_t>(n), 0);
      for (int pos = 0; pos < n; ++pos) {
        const int r = treeRankAt(pos, n, tree);
        ASSERT_GE(r, 0);
        ASSERT_LT(r, n);
        seen[static_cast<size_t>(r)]++;
        EXPECT_EQ(treePositionOf(r, n, tree), pos);
      }
      for (int r = 0; r < n; ++r) EXPECT_EQ(seen[static_cast<size_t>(r)], 1) << "n=" << n << " tree " << tree;
    }
}

TEST(SchedTree, LinksAreMutualAndSpanning) {
  for (int n = 1; n <= kMaxRanks; ++n)
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      int edges = 0;
      for (int r = 0; r < n; ++r) {
        const TreeLinks t = treeLinks(r, n, tree);
        ASSERT_LE(t.nChildren, 2);
        if (t.parent < 0) {
          ++roots;
          EXPECT_EQ(r, treeRoot(n, tree));
        } else {
          const TreeLinks p = treeLinks(t.parent, n, tree);
          int found = 0;
          for (int c = 0; c < p.nChildren; ++c) found += p.children[c] == r;
          EXPECT_EQ(found, 1) << "n=" << n << " tree " << tree << ": rank " << r << " is not a child of its parent "
                              << t.parent;
        }
        for (int c = 0; c < t.nChildren; ++c) {
          const int child = t.children[c];
          ASSERT_GE(child, 0);
          ASSERT_LT(child, n);
          EXPECT_NE(child, r);
          EXPECT_EQ(treeLinks(child, n, tree).parent, r) << "n=" << n << " tree " << tree;
          ++edges;
        }
        for (int c = t.nChildren; c < 2; ++c) EXPECT_EQ(t.children[c], -1);
      }
      EXPECT_EQ(roots, 1) << "n=" << n << " tree " << tree;
      EXPECT_EQ(edges, n - 1) << "n=" << n << " tree " << tree;  // with one root and mutual links: a tree
    }
}

TEST(SchedTree, DepthIsFloorLog2) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    EXPECT_EQ(treeDepth(n), floorLog2(n)) << "n=" << n;
    for (int tree = 0; tree < 2; ++tree) {
      int deepest = 0;
      for (int r = 0; r < n; ++r) {
        int d = 0;
        for (int x = r; treeLinks(x, n, tree).parent >= 0; x = treeLinks(x, n, tree).parent) {
          ++d;
          ASSERT_LE(d, n) << "cycle in tree " << tree << " for n=" << n;
        }
        deepest = std::max(deepest, d);
      }
      EXPECT_EQ(deepest, treeDepth(n)) << "n=" << n << " tree " << tree;
    }
  }
}

TEST(SchedTree, NoRankIsInteriorInBothTrees) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    int both = 0, neither = 0;
    for (int r = 0; r < n; ++r) {
      const bool i0 = treeLinks(r, n, 0).nChildren > 0;
      const bool i1 = treeLinks(r, n, 1).nChildren > 0;
      both += i0 && i1;
      neither += !i0 && !i1;
    }
    EXPECT_EQ(both, 0) << "n=" << n;
    // Odd n leaves the middle rank a leaf in both trees; even n leaves none.
    EXPECT_LE(neither, n % 2) << "n=" << n;
  }
}

}  // namespace
}  // namespace chorus::sched
