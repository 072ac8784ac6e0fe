// describeTopology names every GPU and NIC, the tree shape and the path matrix.
#include <gtest/gtest.h>

#include <string>

#include "common/tree_paths.h"
#include "topo/describe.h"
#include "topo/xml_read.h"

namespace chorus::topo {
namespace {

TEST(Describe, NvSwitchBoxShowsTreeAndMatrix) {
  Topology t;
  ASSERT_EQ(loadTopologyXml(chorus::test::sourcePath("/tests/topo/files/nvswitch_8gpu_8nic.xml"), &t), ncclSuccess);
  std::string text = describeTopology(t);
  EXPECT_NE(text.find("2 CPUs, 8 GPUs, 8 NICs, 8 PCI switches"), std::string::npos) << text;
  EXPECT_NE(text.find("NIC 7 (mlx5_7)"), std::string::npos) << text;
  EXPECT_NE(text.find("NVLink x18 -> NVSwitch fabric (7 GPU peers)"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU x GPU paths"), std::string::npos);
  EXPECT_NE(text.find("NVL/360"), std::string::npos);
  EXPECT_NE(text.find("PIX/48"), std::string::npos);
  EXPECT_NE(text.find("SYS/10"), std::string::npos);
  // The GPU sits below its switch, which sits below CPU 0.
  size_t cpu0 = text.find("CPU 0"), sw = text.find("PCI switch 0000:15:00.0"), gpu0 = text.find("GPU 0 0000:17:00.0");
  ASSERT_NE(gpu0, std::string::npos) << text;
  EXPECT_LT(cpu0, sw);
  EXPECT_LT(sw, gpu0);
}

TEST(Describe, WithoutPathsOmitsMatrices) {
  Topology t;
  Node cpu;
  cpu.type = NodeType::Cpu;
  cpu.numa = 0;
  cpu.cores = 2;
  t.addNode(cpu);
  std::string text = describeTopology(t);
  EXPECT_NE(text.find("CPU 0 numa 0, 2 cores"), std::string::npos) << text;
  EXPECT_EQ(text.find("paths"), std::string::npos) << text;
}

}  // namespace
}  // namespace chorus::topo
