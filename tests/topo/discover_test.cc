// Discovery: on this machine (whatever it has, it must not fail and must
// find a CPU), and on a fake sysfs tree with a PCIe switch, an RDMA NIC, a
// socket NIC on the second NUMA node and virtual interfaces.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/tree_paths.h"
#include "topo/discover.h"
#include "topo/discover_sources.h"
#include "topo/topology_build.h"

namespace chorus::topo {
namespace {

TEST(Discover, ThisMachine) {
  Topology t;
  ASSERT_EQ(discoverTopology(DiscoveryOptions{}, &t), ncclSuccess);
  std::vector<int> cpus = t.nodesOfType(NodeType::Cpu);
  ASSERT_GE(cpus.size(), 1u);
  int cores = 0;
  std::set<int> numas;
  for (int c : cpus) {
    EXPECT_GT(t.nodes[c].cores, 0);
    EXPECT_EQ(t.nodes[c].cores, countMaskBits(t.nodes[c].affinity));
    cores += t.nodes[c].cores;
    EXPECT_TRUE(numas.insert(t.nodes[c].numa).second) << "duplicate NUMA id";
  }
  EXPECT_LE(cores, sysconf(_SC_NPROCESSORS_CONF));
  std::vector<int> nics = t.nodesOfType(NodeType::Nic);
  std::set<std::pair<std::string, int>> seen;
  for (int n : nics) {
    const Node& nic = t.nodes[n];
    EXPECT_FALSE(nic.name.empty());
    EXPECT_GT(nic.speedGBs, 0) << nic.name;
    EXPECT_TRUE(seen.insert({nic.name, nic.port}).second) << nic.name << " listed twice";
    if (nics.size() > 1) {
      EXPECT_NE(nic.name, "lo");
    }
    EXPECT_GE(t.cpuOf(n), 0) << nic.name << " is not attached to a CPU";
    EXPECT_NE(t.path(n, cpus[0]).type, PathType::DIS);
  }
  EXPECT_GE(callerCpuNode(t), 0);
  EXPECT_EQ(t.nodes[callerCpuNode(t)].type, NodeType::Cpu);
}

// hwloc (when built with it) and sysfs must describe the same CPU nodes.
TEST(Discover, HwlocAndSysfsAgree) {
  DiscoveryOptions viaHwloc, viaSysfs;
  viaHwloc.preferHwloc = true;
  viaSysfs.useHwloc = false;
  Topology a, b;
  ASSERT_EQ(discoverTopology(viaHwloc, &a), ncclSuccess);
  ASSERT_EQ(discoverTopology(viaSysfs, &b), ncclSuccess);
  std::vector<int> ca = a.nodesOfType(NodeType::Cpu), cb = b.nodesOfType(NodeType::Cpu);
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t i = 0; i < ca.size(); ++i) {
    EXPECT_EQ(a.nodes[ca[i]].numa, b.nodes[cb[i]].numa);
    EXPECT_EQ(a.nodes[ca[i]].affinity, b.nodes[cb[i]].affinity);
  }
}

TEST(Discover, LocalTopologyIsCached) {
  std::shared_ptr<const LocalTopology> a, b;
  ASSERT_EQ(localTopology(&a), ncclSuccess);
  ASSERT_EQ(localTopology(&b), ncclSuccess);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_FALSE(a->xml.empty());
}

// A scratch sysfs tree under the build directory.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = chorus::test::binaryPath("/fake_sysfs_") + std::to_string(getpid());
    std::filesystem::remove_all(root_);
    // Two NUMA nodes.
    write("sys/devices/system/node/node0/cpulist", "0-3");
    write("sys/devices/system/node/node1/cpulist", "4-5,7");
    write("sys/devices/system/node/node2/cpulist", "");  // memory only
    // Root port 00:01.0 -> switch (up 01:00.0, down 02:00.0) -> NIC function 03:00.0.
    std::string sw = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    std::string nicFn = sw + "/0000:02:00.0/0000:03:00.0";
    write(sw + "/current_link_speed", "32.0 GT/s PCIe");
    write(sw + "/current_link_width", "16");
    write(nicFn + "/current_link_speed", "16.0 GT/s PCIe");
    write(nicFn + "/current_link_width", "16");
    write(nicFn + "/numa_node", "0");
    link("sys/bus/pci/devices/0000:03:00.0", nicFn);
    write(nicFn + "/infiniband/mlx5_0/node_guid", "0c42:a103:00b3:c000");
    write(nicFn + "/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
    write(nicFn + "/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)");
    write(nicFn + "/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
    write(nicFn + "/infiniband/mlx5_0/ports/2/state", "1: DOWN");
    link("sys/class/infiniband/mlx5_0", nicFn + "/infiniband/mlx5_0");
    link(nicFn + "/infiniband/mlx5_0/device", nicFn);
    // ib0 is the netdev of the same function: must not be listed again.
    write(nicFn + "/net/ib0/operstate", "up");
    link("sys/class/net/ib0", nicFn + "/net/ib0");
    // A 25 Gb/s socket NIC on a root port of NUMA node 1.
    std::string ethFn = "sys/devices/pci0000:80/0000:80:03.0";
    write(ethFn + "/numa_node", "1");
    write(ethFn + "/net/eth1/operstate", "up");
    write(ethFn + "/net/eth1/speed", "25000");
    link("sys/bus/pci/devices/0000:80:03.0", ethFn);
    link("sys/class/net/eth1", ethFn + "/net/eth1");
    // Virtual interfaces: lo (skipped, others exist), a down veth (skipped), a bond without speed.
    write("sys/devices/virtual/net/lo/operstate", "unknown");
    link("sys/class/net/lo", "sys/devices/virtual/net/lo");
    write("sys/devices/virtual/net/veth1/operstate", "down");
    link("sys/class/net/veth1", "sys/devices/virtual/net/veth1");
    write("sys/devices/virtual/net/bond0/operstate", "up");
    link("sys/class/net/bond0", "sys/devices/virtual/net/bond0");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void write(const std::string& rel, const std::string& text) {
    std::string path = root_ + "/" + rel;
    std::filesystem::create_directories(path.substr(0, path.rfind('/')));
    std::ofstream(path) << text << "\n";
  }
  void link(const std::string& rel, const std::string& target) {
    std::string path = root_ + "/" + rel;
    std::filesystem::create_directories(path.substr(0, path.rfind('/')));
    ASSERT_EQ(symlink((root_ + "/" + target).c_str(), path.c_str()), 0) << path;
  }

  DiscoveryOptions options() const {
    DiscoveryOptions o;
    o.sysRoot = root_;
    return o;
  }

  std::string root_;
};

int nicNamed(const Topology& t, const std::string& name) {
  for (int n : t.nodesOfType(NodeType::Nic))
    if (t.nodes[n].name == name) return n;
  return -1;
}

TEST_F(FakeSysfs, FindsCpusSwitchAndNics) {
  Topology t;
  ASSERT_EQ(discoverTopology(options(), &t), ncclSuccess);
  std::vector<int> cpus = t.nodesOfType(NodeType::Cpu);
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(t.nodes[cpus[0]].cores, 4);
  EXPECT_EQ(t.nodes[cpus[1]].cores, 3);
  EXPECT_EQ(t.nodes[cpus[1]].affinity, "000000b0");
  ASSERT_EQ(t.nodesOfType(NodeType::PciSwitch).size(), 1u);
  int sw = t.nodesOfType(NodeType::PciSwitch)[0];
  EXPECT_EQ(t.nodes[sw].busId, "0000:01:00.0");
  EXPECT_DOUBLE_EQ(t.links[t.findLink(sw, cpus[0])].bwGBs, bw::kPciGen5x16);

  ASSERT_EQ(t.nodesOfType(NodeType::Nic).size(), 3u);  // mlx5_0 port 1, eth1, bond0
  int ib = nicNamed(t, "mlx5_0");
  ASSERT_GE(ib, 0);
  EXPECT_TRUE(t.nodes[ib].rdma);
  EXPECT_EQ(t.nodes[ib].port, 1);
  EXPECT_EQ(t.nodes[ib].guid, 0x0c42a10300b3c000ull);
  EXPECT_DOUBLE_EQ(t.nodes[ib].speedGBs, 25.0);
  EXPECT_EQ(t.nodes[ib].busId, "0000:03:00.0");
  EXPECT_EQ(t.cpuOf(ib), cpus[0]);
  EXPECT_EQ(t.path(ib, cpus[0]).hops.size(), 3u);  // NIC -> switch -> CPU
  EXPECT_EQ(nicNamed(t, "ib0"), -1);
  EXPECT_EQ(nicNamed(t, "lo"), -1);
  EXPECT_EQ(nicNamed(t, "veth1"), -1);

  int eth = nicNamed(t, "eth1");
  ASSERT_GE(eth, 0);
  EXPECT_FALSE(t.nodes[eth].rdma);
  EXPECT_DOUBLE_EQ(t.nodes[eth].speedGBs, 25000 / 8000.0);
  EXPECT_EQ(t.cpuOf(eth), cpus[1]);
  EXPECT_EQ(t.path(ib, eth).type, PathType::SYS);

  int bond = nicNamed(t, "bond0");
  ASSERT_GE(bond, 0);
  EXPECT_TRUE(t.nodes[bond].busId.empty());
  EXPECT_GT(t.nodes[bond].speedGBs, 0);  // no speed file: a default
  EXPECT_EQ(t.cpuOf(bond), cpus[0]);
}

TEST_F(FakeSysfs, InterfaceFilterAndLoopbackFallback) {
  DiscoveryOptions o = options();
  o.ifname = "=lo";
  Topology t;
  ASSERT_EQ(discoverTopology(o, &t), ncclSuccess);
  std::vector<int> nics = t.nodesOfType(NodeType::Nic);
  ASSERT_EQ(nics.size(), 2u);  // the RDMA port is not filtered by a socket interface list
  EXPECT_GE(nicNamed(t, "lo"), 0);
}

TEST(DiscoverEmpty, NoSysfsStillGivesOneCpu) {
  DiscoveryOptions o;
  o.sysRoot = "/nonexistent-sysfs-root";
  Topology t;
  ASSERT_EQ(discoverTopology(o, &t), ncclSuccess);
  ASSERT_EQ(t.nodesOfType(NodeType::Cpu).size(), 1u);
  EXPECT_EQ(t.nodes[t.nodesOfType(NodeType::Cpu)[0]].cores, sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_TRUE(t.nodesOfType(NodeType::Nic).empty());
}

TEST(DiscoverHelpers, MasksAndPciPaths) {
  EXPECT_EQ(cpuMaskString({0, 1, 2, 3, 32}), "00000001,0000000f");
  EXPECT_EQ(cpusInMask("00000001,0000000f"), (std::vector<int>{0, 1, 2, 3, 32}));
  EXPECT_EQ(countMaskBits("ffff,ffffffff"), 48);
  EXPECT_EQ(detail::pciFunctionInPath("/sys/devices/pci0000:00/0000:00:02.0/virtio2/net/eth0"), "0000:00:02.0");
  EXPECT_EQ(detail::pciFunctionInPath("/sys/devices/virtual/net/lo"), "");
}

}  // namespace
}  // namespace chorus::topo
