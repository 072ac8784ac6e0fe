// Graph search on synthetic machines and the shipped machine files: ring
// validity, NVLink-only rings, socket crossings, channel counts, NIC rail
// alignment, scaling to 1024 hosts.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "graph/graph_test_util.h"
#include "graph/links.h"
#include "graph/routes.h"
#include "topo/xml_read.h"

namespace chorus::graph::test {
namespace {

using topo::PathType;

int count(const std::vector<PathType>& hops, PathType t) {
  return static_cast<int>(std::count(hops.begin(), hops.end(), t));
}

topo::CommTopology fromFile(const std::string& path, int hosts) {
  topo::Topology t;
  EXPECT_EQ(topo::loadTopologyXml(path, &t), ncclSuccess) << path;
  return replicateHost(t, hosts, 0, false);
}

TEST(GraphSearch, NvSwitchRingsUseOnlyNvLink) {
  auto t = synthetic(SyntheticShape::NvSwitch, 1, 8);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  for (int c = 0; c < g.nchannels(); ++c)
    for (PathType p : intraHops(t, g, c, 0)) EXPECT_EQ(p, PathType::NVL) << "channel " << c;
  EXPECT_EQ(g.typeIntra, PathType::NVL);
  // One host, GPUs already in a good order: the ring keeps rank order.
  for (int p = 0; p < 8; ++p) EXPECT_EQ(g.rings[0].order[p], p);
}

TEST(GraphSearch, PcieTwoSocketCrossesTwice) {
  auto t = synthetic(SyntheticShape::Pcie, 1, 8);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  for (int c = 0; c < g.nchannels(); ++c) EXPECT_EQ(count(intraHops(t, g, c, 0), PathType::SYS), 2) << c;
}

TEST(GraphSearch, PcieTwoSocketCrossesTwiceFromScrambledPlacement) {
  // Ranks alternate sockets: rank order would cross the CPU link 8 times.
  auto t = synthetic(SyntheticShape::Pcie, 1, 8);
  const auto plain = t;
  for (int r = 0; r < 8; ++r) t.ranks[r].device = plain.ranks[(r % 2) * 4 + r / 2].device;
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  EXPECT_EQ(count(intraHops(t, g, 0, 0), PathType::SYS), 2);
  bool rankOrder = true;
  for (int p = 0; p < 8; ++p) rankOrder &= g.rings[0].order[p] == p;
  EXPECT_FALSE(rankOrder);
}

TEST(GraphSearch, PairwiseNvLinkPairsStayAdjacent) {
  auto t = synthetic(SyntheticShape::Pairwise, 1, 4);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  EXPECT_EQ(count(intraHops(t, g, 0, 0), PathType::NVL), 2);
}

TEST(GraphSearch, MoreNvLinksMoreChannels) {
  int previous = 0;
  for (int links : {1, 2, 4}) {
    auto t = synthetic(SyntheticShape::Mesh, 1, 4, links);
    CommGraph g = searchOk(t);
    expectValidRings(t, g);
    for (int c = 0; c < g.nchannels(); ++c)
      for (PathType p : intraHops(t, g, c, 0)) EXPECT_EQ(p, PathType::NVL) << links << " links, channel " << c;
    printf("[ search ] 4-GPU NVLink mesh, %d NVLinks per pair: %d channels\n", links, g.searchedChannels);
    EXPECT_GE(g.searchedChannels, 2 * links);  // a ring and its reverse per NVLink
    EXPECT_LE(g.searchedChannels, 3 * links);  // each GPU has 3 x links NVLinks out
    EXPECT_GT(g.searchedChannels, previous);
    previous = g.searchedChannels;
  }
}

TEST(GraphSearch, NvSwitchChannelsFollowTheGpuNvLinkCount) {
  for (int links : {6, 12, 18}) {
    auto t = synthetic(SyntheticShape::NvSwitch, 1, 8, links);
    EXPECT_EQ(searchOk(t).searchedChannels, links);  // 20 GB/s channels out of links x 20 GB/s per GPU
  }
}

TEST(GraphSearch, ChannelBoundsApply) {
  auto t = synthetic(SyntheticShape::Mesh, 1, 4, 4);
  const int free = searchOk(t).searchedChannels;
  ASSERT_GT(free, 2);
  SearchOptions capped;
  capped.maxChannels = 2;
  EXPECT_EQ(searchOk(t, capped).nchannels(), 2);
  SearchOptions raised;
  raised.minChannels = free + 2;
  CommGraph g = searchOk(t, raised);
  EXPECT_EQ(g.searchedChannels, free);
  EXPECT_EQ(g.nchannels(), free + 2);
  expectValidRings(t, g);
}

TEST(GraphSearch, MultiHostRingsEnterAndLeaveEachHostOnceRailAligned) {
  auto t = synthetic(SyntheticShape::NvSwitch, 4, 8);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  EXPECT_EQ(g.nicsPerHost, 8);
  EXPECT_EQ(g.typeInter, PathType::NET);
  const HostRoutes routes(t.hosts[0]);
  for (int c = 0; c < g.nchannels(); ++c) {
    const RingChannel& ring = g.rings[c];
    for (int h = 0; h < 4; ++h) {
      ASSERT_GE(ring.nic[h], 0);
      // Rail-aligned: the same NIC index and the same local GPUs at both ends on every host.
      EXPECT_EQ(t.hosts[h].nodes[ring.nic[h]].index, c % 8) << "channel " << c << " host " << h;
      EXPECT_EQ(t.ranks[ring.order[ring.hostStart[h]]].localRank, t.ranks[ring.order[0]].localRank);
      // Both ends sit next to the NIC (same PCIe switch).
      const int entry = t.ranks[ring.order[ring.hostStart[h]]].device;
      const int exit = t.ranks[ring.order[ring.hostStart[h] + 7]].device;
      EXPECT_EQ(routes.route(ring.nic[h], entry).type, PathType::PIX);
      EXPECT_EQ(routes.route(exit, ring.nic[h]).type, PathType::PIX);
    }
    for (int h = 0; h < 4; ++h)
      for (PathType p : intraHops(t, g, c, h)) EXPECT_EQ(p, PathType::NVL);
  }
}

TEST(GraphSearch, RoundRobinPlacementGivesNonRankOrderRings) {
  auto t = synthetic(SyntheticShape::Host, 4, 2, -1, true);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  EXPECT_EQ(g.nhosts, 4);
  EXPECT_EQ(g.ranksPerHost, 2);
  EXPECT_TRUE(g.cpuDevices);
  // Host 0 holds ranks 0 and 4: they are neighbours on the ring.
  EXPECT_EQ(g.rings[0].order[0], 0);
  EXPECT_EQ(g.rings[0].order[1], 4);
}

void expectTreeShape(const CommGraph& g, int maxHostLevels) {
  for (int c = 0; c < std::min(2, g.nchannels()); ++c)
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      std::vector<int> parentOf(g.nranks, -2);
      for (int r = 0; r < g.nranks; ++r) {
        const sched::TreeLinks L = treeLinks(g, c, tree, r);
        roots += L.parent < 0;
        for (int i = 0; i < L.nChildren; ++i) {
          EXPECT_EQ(treeLinks(g, c, tree, L.children[i]).parent, r) << "child " << L.children[i] << " of " << r;
          parentOf[L.children[i]] = r;
        }
        // Host levels crossed on the way to the root.
        int levels = 0, hops = 0;
        for (int cur = r, up = L.parent; up >= 0 && hops <= g.nranks; cur = up, up = treeLinks(g, c, tree, up).parent) {
          levels += g.hostOfRank[cur] != g.hostOfRank[up];
          ++hops;
        }
        ASSERT_LE(hops, g.nranks) << "cycle in tree";
        EXPECT_LE(levels, maxHostLevels) << "rank " << r;
        EXPECT_LE(hops, 2 * maxHostLevels + g.ranksOnHost[g.hostOfRank[r]]) << "rank " << r;
      }
      EXPECT_EQ(roots, 1);
      for (int r = 0; r < g.nranks; ++r)
        if (treeLinks(g, c, tree, r).parent >= 0) {
          EXPECT_EQ(parentOf[r], treeLinks(g, c, tree, r).parent);
        }
    }
}

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

TEST(GraphSearch, TreesAreDoubleBinaryAcrossHostsWithChains) {
  for (int hosts : {1, 2, 3, 5, 8, 64}) {
    SCOPED_TRACE(hosts);
    auto t = synthetic(SyntheticShape::NvSwitch, hosts, 8);
    CommGraph g = searchOk(t);
    expectTreeShape(g, ceilLog2(hosts) + 1);
  }
  auto single = synthetic(SyntheticShape::Host, 1, 7);
  CommGraph g = searchOk(single);
  EXPECT_LE(treeDepthOf(g, 0, 0, g.rings[0].order[6]), 3);  // binary tree over one host's ranks
}

TEST(GraphSearch, HierGroupsJoinSameLocalPositions) {
  auto t = synthetic(SyntheticShape::NvSwitch, 4, 8, -1, true);
  CommGraph g = searchOk(t);
  ASSERT_TRUE(hierSupported(g));
  for (int r = 0; r < g.nranks; ++r) {
    const HierLinks h = hierLinks(g, 0, r);
    EXPECT_EQ(h.localSize, 8);
    EXPECT_EQ(h.interSize, 4);
    EXPECT_EQ(g.hostOfRank[h.localNext], g.hostOfRank[r]);
    EXPECT_EQ(hierLinks(g, 0, h.interNext).localPos, h.localPos);
    EXPECT_EQ(hierLinks(g, 0, h.interNext).interPrev, r);
    EXPECT_EQ(hierLinks(g, 0, h.localNext).localPrev, r);
  }
  auto uneven = synthetic(SyntheticShape::Host, 2, 3);
  uneven.ranks.pop_back();
  EXPECT_FALSE(hierSupported(searchOk(uneven)));
}

TEST(GraphSearch, ScalesTo1024Hosts) {
  for (int hosts : {1, 2, 8, 64, 1024}) {
    auto t = synthetic(SyntheticShape::NvSwitch, hosts, 8);
    const auto start = std::chrono::steady_clock::now();
    CommGraph g = searchOk(t);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    printf("[ search ] %4d hosts x 8 GPUs: %d channels in %.1f ms\n", hosts, g.nchannels(), ms);
    expectValidRings(t, g);
    if (hosts == 1024) {
      EXPECT_LT(ms, 1000.0);
    }
  }
}

TEST(GraphSearch, RejectsInconsistentTopology) {
  auto t = synthetic(SyntheticShape::Host, 2, 2);
  t.ranks[3].host = 7;
  CommGraph g;
  EXPECT_EQ(searchGraph(t, {}, &g), ncclInvalidArgument);
  t.ranks[3].host = 1;
  t.ranks[3].device = 99;
  EXPECT_EQ(searchGraph(t, {}, &g), ncclInvalidArgument);
}

TEST(GraphDump, XmlListsChannelsNicsAndGpus) {
  auto t = synthetic(SyntheticShape::NvSwitch, 2, 8);
  SearchOptions o;
  o.maxChannels = 4;
  CommGraph g = searchOk(t, o);
  const std::string xml = graphToXml(t, g, 0);
  auto occurrences = [&](const std::string& what) {
    int n = 0;
    for (size_t p = xml.find(what); p != std::string::npos; p = xml.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(occurrences("<graph "), 2);
  EXPECT_EQ(occurrences("<channel>"), 2 * 4);
  EXPECT_EQ(occurrences("<gpu dev="), 2 * 4 * 8);
  EXPECT_EQ(occurrences("<net dev="), 2 * 4 * 2);
  EXPECT_NE(xml.find("pattern=\"4\" nchannels=\"4\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("typeintra=\"NVL\" typeinter=\"NET\""), std::string::npos) << xml;
}

// ---- The shipped machine files (tests/topo/files) ----

TEST(GraphShipped, NvSwitch8Gpu8Nic) {
  const std::string path = shippedFile("nvswitch_8gpu_8nic.xml");
  if (path.empty()) GTEST_SKIP() << "machine file not shipped";
  auto t = fromFile(path, 2);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  EXPECT_EQ(g.searchedChannels, 18);  // 18 NVLinks per GPU into the fabric
  EXPECT_EQ(g.nicsPerHost, 8);
  const HostRoutes routes(t.hosts[0]);
  for (int c = 0; c < g.nchannels(); ++c)
    for (int h = 0; h < 2; ++h) {
      for (PathType p : intraHops(t, g, c, h)) EXPECT_EQ(p, PathType::NVL);
      // One NIC per GPU: one end of the host's segment is the NIC's own GPU
      // (same PCIe switch), the other reaches it through its socket's CPU at worst.
      const RingChannel& ring = g.rings[c];
      const PathType in = routes.route(ring.nic[h], t.ranks[ring.order[ring.hostStart[h]]].device).type;
      const PathType out = routes.route(t.ranks[ring.order[ring.hostStart[h] + 7]].device, ring.nic[h]).type;
      EXPECT_TRUE(in == PathType::PIX || out == PathType::PIX) << "channel " << c;
    }
  EXPECT_LE(g.typeNic, PathType::PHB);
}

TEST(GraphShipped, Pcie8Gpu2Socket) {
  const std::string path = shippedFile("pcie_8gpu_2socket.xml");
  if (path.empty()) GTEST_SKIP() << "machine file not shipped";
  auto t = fromFile(path, 1);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  for (int c = 0; c < g.nchannels(); ++c) EXPECT_EQ(count(intraHops(t, g, c, 0), PathType::SYS), 2) << c;
  EXPECT_EQ(g.searchedChannels, 1);
}

TEST(GraphShipped, NvLink4GpuPairwise) {
  const std::string path = shippedFile("nvlink_4gpu_pairwise.xml");
  if (path.empty()) GTEST_SKIP() << "machine file not shipped";
  auto t = fromFile(path, 1);
  CommGraph g = searchOk(t);
  expectValidRings(t, g);
  // NVLink joins every pair (4 links each): rings use NVLink only, several channels.
  for (int c = 0; c < g.nchannels(); ++c)
    for (PathType p : intraHops(t, g, c, 0)) EXPECT_EQ(p, PathType::NVL) << "channel " << c;
  EXPECT_GE(g.searchedChannels, 8);
}

}  // namespace
}  // namespace chorus::graph::test
