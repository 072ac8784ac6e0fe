// The machine files shipped in tests/topo/files load with the right shape and
// the path classes a reader of NCCL's topology would expect.
#include <gtest/gtest.h>

#include <string>

#include "common/tree_paths.h"
#include "topo/xml_read.h"

namespace chorus::topo {
namespace {

std::string shipped(const char* name) { return chorus::test::sourcePath("/tests/topo/files/") + name; }

Topology load(const char* name) {
  Topology t;
  EXPECT_EQ(loadTopologyXml(shipped(name), &t), ncclSuccess) << name;
  return t;
}

PathType gpuGpu(const Topology& t, int a, int b) { return t.path(t.findGpu(a), t.findGpu(b)).type; }

PathType gpuNic(const Topology& t, int gpu, int nic) {
  return t.path(t.findGpu(gpu), t.nodesOfType(NodeType::Nic)[nic]).type;
}

TEST(ShippedFiles, NvSwitch8Gpu8Nic) {
  Topology t = load("nvswitch_8gpu_8nic.xml");
  ASSERT_EQ(t.nodesOfType(NodeType::Gpu).size(), 8u);
  ASSERT_EQ(t.nodesOfType(NodeType::Nic).size(), 8u);
  ASSERT_EQ(t.nodesOfType(NodeType::Cpu).size(), 2u);
  ASSERT_EQ(t.nodesOfType(NodeType::PciSwitch).size(), 8u);
  for (int a = 0; a < 8; ++a) {
    const Node& g = t.nodes[t.findGpu(a)];
    EXPECT_EQ(g.smVersion, 90);
    EXPECT_EQ(g.nvSwitchLinks, 18);
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_EQ(gpuGpu(t, a, b), PathType::NVL) << a << "-" << b;
      EXPECT_DOUBLE_EQ(t.path(t.findGpu(a), t.findGpu(b)).bwGBs, 18 * bw::kNvLinkPerLink(90));
    }
  }
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(gpuNic(t, g, g), PathType::PIX) << g;
    EXPECT_EQ(gpuNic(t, g, g ^ 1), PathType::PHB) << g;  // same socket, other switch
    EXPECT_EQ(gpuNic(t, g, (g + 4) % 8), PathType::SYS) << g;
  }
  const Node& nic = t.nodes[t.nodesOfType(NodeType::Nic)[0]];
  EXPECT_EQ(nic.name, "mlx5_0");
  EXPECT_TRUE(nic.rdma);
  EXPECT_TRUE(nic.gdr);
  EXPECT_DOUBLE_EQ(nic.speedGBs, 50.0);
  EXPECT_EQ(t.nodes[t.nodesOfType(NodeType::Cpu)[0]].cores, 48);
}

TEST(ShippedFiles, Pcie8Gpu2Socket) {
  Topology t = load("pcie_8gpu_2socket.xml");
  ASSERT_EQ(t.nodesOfType(NodeType::Gpu).size(), 8u);
  ASSERT_EQ(t.nodesOfType(NodeType::Nic).size(), 2u);
  ASSERT_EQ(t.nodesOfType(NodeType::Cpu).size(), 2u);
  ASSERT_EQ(t.nodesOfType(NodeType::PciSwitch).size(), 6u);
  for (const Link& l : t.links) EXPECT_NE(l.type, LinkType::NvLink);
  EXPECT_EQ(gpuGpu(t, 0, 1), PathType::PIX);
  EXPECT_EQ(gpuGpu(t, 2, 3), PathType::PIX);
  EXPECT_EQ(gpuGpu(t, 0, 2), PathType::PHB);
  EXPECT_EQ(gpuGpu(t, 1, 3), PathType::PHB);
  EXPECT_EQ(gpuGpu(t, 0, 4), PathType::SYS);
  EXPECT_EQ(gpuGpu(t, 3, 7), PathType::SYS);
  EXPECT_EQ(gpuGpu(t, 4, 5), PathType::PIX);
  EXPECT_EQ(gpuNic(t, 0, 0), PathType::PXB);
  EXPECT_EQ(gpuNic(t, 2, 0), PathType::PHB);
  EXPECT_EQ(gpuNic(t, 0, 1), PathType::SYS);
  EXPECT_EQ(gpuNic(t, 5, 1), PathType::PXB);
  EXPECT_DOUBLE_EQ(t.path(t.findGpu(0), t.findGpu(1)).bwGBs, bw::kPciGen4x16);
  EXPECT_DOUBLE_EQ(t.path(t.findGpu(0), t.findGpu(4)).bwGBs, bw::kSmpIntel);
  EXPECT_EQ(t.nodes[t.findGpu(6)].numa, 1);
}

TEST(ShippedFiles, NvLink4GpuPairwise) {
  Topology t = load("nvlink_4gpu_pairwise.xml");
  ASSERT_EQ(t.nodesOfType(NodeType::Gpu).size(), 4u);
  ASSERT_EQ(t.nodesOfType(NodeType::Nic).size(), 1u);
  ASSERT_EQ(t.nodesOfType(NodeType::Cpu).size(), 1u);
  EXPECT_TRUE(t.nodesOfType(NodeType::PciSwitch).empty());
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      EXPECT_EQ(gpuGpu(t, a, b), PathType::NVL);
      int li = t.findLink(t.findGpu(a), t.findGpu(b));
      ASSERT_GE(li, 0);
      EXPECT_EQ(t.links[li].count, 4);
      EXPECT_FALSE(t.links[li].viaNvSwitch);
      EXPECT_DOUBLE_EQ(t.links[li].bwGBs, 4 * bw::kNvLinkPerLink(80));
    }
    EXPECT_EQ(gpuNic(t, a, 0), PathType::PHB);
  }
}

}  // namespace
}  // namespace chorus::topo
