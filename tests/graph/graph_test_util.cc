#include "graph/graph_test_util.h"

#include <unistd.h>

#include "common/tree_paths.h"
#include "graph/routes.h"

namespace chorus::graph::test {

CommGraph searchOk(const topo::CommTopology& t, SearchOptions opts) {
  CommGraph g;
  EXPECT_EQ(searchGraph(t, opts, &g), ncclSuccess);
  return g;
}

topo::CommTopology synthetic(SyntheticShape shape, int hosts, int perHost, int nvlinks, bool rr) {
  SyntheticSpec s;
  s.shape = shape;
  s.hosts = hosts;
  s.perHost = perHost;
  s.nvlinks = nvlinks;
  s.roundRobin = rr;
  return syntheticCommTopology(s);
}

void expectValidRings(const topo::CommTopology& t, const CommGraph& g) {
  ASSERT_EQ(g.nranks, t.nranks());
  ASSERT_GE(g.nchannels(), 1);
  for (int c = 0; c < g.nchannels(); ++c) {
    const RingChannel& ring = g.rings[c];
    ASSERT_EQ(static_cast<int>(ring.order.size()), g.nranks) << "channel " << c;
    std::vector<int> seen(g.nranks, 0);
    for (int p = 0; p < g.nranks; ++p) {
      const int r = ring.order[p];
      ASSERT_TRUE(r >= 0 && r < g.nranks);
      ++seen[r];
      EXPECT_EQ(ring.position[r], p);
    }
    for (int r = 0; r < g.nranks; ++r) EXPECT_EQ(seen[r], 1) << "rank " << r << " in channel " << c;
    int expectStart = 0;
    for (int h = 0; h < g.nhosts; ++h) {
      EXPECT_EQ(ring.hostStart[h], expectStart);
      for (int i = 0; i < g.ranksOnHost[h]; ++i)
        EXPECT_EQ(t.ranks[ring.order[ring.hostStart[h] + i]].host, h) << "channel " << c << " host " << h;
      expectStart += g.ranksOnHost[h];
    }
  }
}

std::vector<topo::PathType> intraHops(const topo::CommTopology& t, const CommGraph& g, int c, int h) {
  const RingChannel& ring = g.rings[c];
  const HostRoutes routes(t.hosts[h]);
  const int n = g.ranksOnHost[h];
  std::vector<topo::PathType> hops;
  const int closing = g.nhosts == 1 ? n : n - 1;
  for (int i = 0; i < closing && n > 1; ++i) {
    const int a = ring.order[ring.hostStart[h] + i];
    const int b = ring.order[ring.hostStart[h] + (i + 1) % n];
    hops.push_back(routes.route(t.ranks[a].device, t.ranks[b].device).type);
  }
  return hops;
}

std::string shippedFile(const char* name) {
  std::string path = chorus::test::sourcePath("/tests/topo/files/") + name;
  return access(path.c_str(), R_OK) == 0 ? path : "";
}

}  // namespace chorus::graph::test
