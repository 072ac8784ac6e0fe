// Topology graph basics and path classification on small hand-built graphs.
#include <gtest/gtest.h>

#include "topo/path_level.h"
#include "topo/topology.h"
#include "topo/topology_build.h"

namespace chorus::topo {
namespace {

Node make(NodeType type, const char* busId = "", int numa = 0) {
  Node n;
  n.type = type;
  n.busId = busId;
  n.numa = numa;
  if (type == NodeType::Gpu) n.smVersion = 80;
  return n;
}

TEST(PathNames, ParseAndPrint) {
  PathType p;
  ASSERT_TRUE(parsePathType("nvl", &p));
  EXPECT_EQ(p, PathType::NVL);
  ASSERT_TRUE(parsePathType("PHB", &p));
  EXPECT_EQ(p, PathType::PHB);
  ASSERT_TRUE(parsePathType("5", &p));
  EXPECT_EQ(p, PathType::PXB);
  EXPECT_FALSE(parsePathType("11", &p));
  EXPECT_FALSE(parsePathType("FAST", &p));
  EXPECT_FALSE(parsePathType("", &p));
  EXPECT_STREQ(pathTypeName(PathType::SYS), "SYS");
  EXPECT_STREQ(nodeTypeName(NodeType::Nic), "NIC");
  EXPECT_STREQ(linkTypeName(LinkType::NvLink), "NVLink");
}

// The path-level knobs share the legacy numbering and differ in the names
// and digits they accept (NCCL_P2P_LEVEL vs NCCL_NET_GDR_LEVEL).
TEST(PathLevels, LegacyNumbersAndPerKnobNames) {
  const PathType legacy[] = {PathType::LOC, PathType::PIX, PathType::PXB, PathType::PHB, PathType::SYS, PathType::SYS};
  for (unsigned long n = 0; n < 6; ++n) EXPECT_EQ(legacyPathLevel(n), legacy[n]) << n;
  EXPECT_EQ(legacyPathLevel(123456), PathType::SYS);
  PathType p = PathType::DIS;
  EXPECT_TRUE(parsePathLevel("pxn", kP2pLevelSyntax, &p));
  EXPECT_EQ(p, PathType::PXN);
  p = PathType::DIS;
  EXPECT_FALSE(parsePathLevel("pxn", kGdrLevelSyntax, &p));
  EXPECT_EQ(p, PathType::DIS);
  EXPECT_TRUE(parsePathLevel("123456789", kP2pLevelSyntax, &p));
  EXPECT_EQ(p, PathType::SYS);
  EXPECT_FALSE(parsePathLevel("1234567890", kP2pLevelSyntax, &p));
  EXPECT_FALSE(parsePathLevel("12", kGdrLevelSyntax, &p));
  EXPECT_TRUE(parsePathLevel("2", kGdrLevelSyntax, &p));
  EXPECT_EQ(p, PathType::PXB);
  for (const char* bad : {"", "NET", "DIS", "-1", "0x1", " 1"}) {
    EXPECT_FALSE(parsePathLevel(bad, kP2pLevelSyntax, &p)) << bad;
    EXPECT_FALSE(parsePathLevel(bad, kGdrLevelSyntax, &p)) << bad;
  }
  EXPECT_EQ(pathLevelNames(kGdrLevelSyntax), "LOC, PIX, PXB, PHB, SYS");
  EXPECT_EQ(pathLevelNames(kP2pLevelSyntax), "LOC, NVL, NVB, C2C, PIX, PXB, PXN, PHB, SYS");
}

TEST(BusIds, Normalized) {
  EXPECT_EQ(normalizeBusId("00000000:1A:00.0"), "0000:1a:00.0");
  EXPECT_EQ(normalizeBusId("1a:00.1"), "0000:1a:00.1");
  EXPECT_EQ(normalizeBusId("0000:1a:00.0"), "0000:1a:00.0");
  EXPECT_EQ(normalizeBusId("0000:1a:00"), "");
  EXPECT_EQ(normalizeBusId("0000:1a:20.0"), "");  // device > 31
  EXPECT_EQ(normalizeBusId("pci0000:00"), "");
}

// CPU0 - switch - {GPU0, GPU1}; CPU0 - GPU2 (root port); CPU1 - GPU3; NVLink GPU0-GPU2, GPU2-GPU3.
class SmallBox : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu0 = t.addNode(make(NodeType::Cpu, "", 0));
    cpu1 = t.addNode(make(NodeType::Cpu, "", 1));
    sw = t.addNode(make(NodeType::PciSwitch, "0000:10:00.0"));
    for (int i = 0; i < 4; ++i) {
      Node g = make(NodeType::Gpu,
                    i == 3   ? "0000:90:00.0"
                    : i == 2 ? "0000:20:00.0"
                    : i == 0 ? "0000:11:00.0"
                             : "0000:12:00.0",
                    i == 3 ? 1 : 0);
      g.cudaDev = i;
      gpu[i] = t.addNode(g);
    }
    nic = t.addNode(make(NodeType::Nic, "0000:13:00.0"));
    t.addLink(sw, cpu0, LinkType::Pci, 24);
    t.addLink(gpu[0], sw, LinkType::Pci, 24);
    t.addLink(gpu[1], sw, LinkType::Pci, 24);
    t.addLink(nic, sw, LinkType::Pci, 12);
    t.addLink(gpu[2], cpu0, LinkType::Pci, 24);
    t.addLink(gpu[3], cpu1, LinkType::Pci, 24);
    addNvLinks(&t, gpu[0], gpu[2], 1);
    addNvLinks(&t, gpu[2], gpu[3], 2);
    linkCpuSockets(&t);
    t.computePaths();
  }
  Topology t;
  int cpu0, cpu1, sw, gpu[4], nic;
};

TEST_F(SmallBox, Lookups) {
  EXPECT_EQ(t.nodes[gpu[3]].index, 3);
  EXPECT_EQ(t.nodes[nic].index, 0);
  EXPECT_EQ(t.findGpu(2), gpu[2]);
  EXPECT_EQ(t.findGpu(7), -1);
  EXPECT_EQ(t.findByBusId("90:00.0"), gpu[3]);
  EXPECT_EQ(t.findByBusId("0000:99:00.0"), -1);
  EXPECT_EQ(t.cpuOf(gpu[1]), cpu0);
  EXPECT_EQ(t.cpuOf(gpu[3]), cpu1);
  EXPECT_EQ(t.cpuOf(cpu1), cpu1);
  EXPECT_EQ(t.nodesOfType(NodeType::Gpu), (std::vector<int>{gpu[0], gpu[1], gpu[2], gpu[3]}));
  EXPECT_EQ(t.links.size(), 2u * 9);
}

TEST_F(SmallBox, PathClasses) {
  EXPECT_EQ(t.path(gpu[0], gpu[0]).type, PathType::LOC);
  EXPECT_EQ(t.path(gpu[0], gpu[1]).type, PathType::PIX);
  EXPECT_EQ(t.path(gpu[0], nic).type, PathType::PIX);
  EXPECT_DOUBLE_EQ(t.path(gpu[0], nic).bwGBs, 12);
  EXPECT_EQ(t.path(gpu[0], gpu[2]).type, PathType::NVL);
  // One NVLink (20 GB/s) is the path although PCI through the CPU is nominally wider (24).
  EXPECT_DOUBLE_EQ(t.path(gpu[0], gpu[2]).bwGBs, bw::kNvLinkPerLink(80));
  EXPECT_EQ(t.path(gpu[0], gpu[2]).hops.size(), 2u);
  EXPECT_EQ(t.path(gpu[2], gpu[3]).type, PathType::NVL);
  // GPU0 -> GPU3: NVLink through GPU2 (20 GB/s) beats PCI across the sockets (10 GB/s).
  EXPECT_EQ(t.path(gpu[0], gpu[3]).type, PathType::NVB);
  EXPECT_EQ(t.path(gpu[0], gpu[3]).hops, (std::vector<int>{gpu[0], gpu[2], gpu[3]}));
  // GPU1 -> GPU2: over PCI through the CPU; GPU0 may not relay PCI traffic onto its NVLink.
  EXPECT_EQ(t.path(gpu[1], gpu[2]).type, PathType::PHB);
  EXPECT_EQ(t.path(gpu[1], gpu[3]).type, PathType::SYS);
  EXPECT_EQ(t.path(nic, gpu[3]).type, PathType::SYS);
  EXPECT_EQ(t.path(gpu[2], cpu0).type, PathType::PHB);
  // Symmetric classes.
  for (int a = 0; a < static_cast<int>(t.nodes.size()); ++a)
    for (int b = 0; b < static_cast<int>(t.nodes.size()); ++b) EXPECT_EQ(t.path(a, b).type, t.path(b, a).type);
}

TEST(Paths, DisconnectedAndNicsAreLeaves) {
  Topology t;
  int c = t.addNode(make(NodeType::Cpu));
  int a = t.addNode(make(NodeType::Nic, "0000:01:00.0"));
  int b = t.addNode(make(NodeType::Nic, "0000:02:00.0"));
  int lone = t.addNode(make(NodeType::Gpu, "0000:03:00.0"));
  t.addLink(a, c, LinkType::Pci, 24);
  t.addLink(b, a, LinkType::Pci, 24);  // only reachable through NIC a
  t.computePaths();
  EXPECT_EQ(t.path(c, lone).type, PathType::DIS);
  EXPECT_TRUE(t.path(c, lone).hops.empty());
  EXPECT_EQ(t.path(c, b).type, PathType::DIS);
  EXPECT_EQ(t.path(a, b).type, PathType::PIX);  // direct link between the endpoints
}

}  // namespace
}  // namespace chorus::topo
