// GpuNicRoutes: the path class from a rank's GPU to the NIC behind a
// network backend device, matched by PCI function, then by name and port,
// else the GPU's own CPU.
#include <gtest/gtest.h>

#include "topo/nic_routes.h"

namespace chorus::topo {
namespace {

// A node under `parent` on PCI.
int addPciNode(Topology* t, NodeType type, const char* busId, const char* name, int port, int parent) {
  Node n;
  n.type = type;
  n.busId = busId;
  n.name = name;
  n.port = port;
  const int self = t->addNode(n);
  t->addLink(self, parent, LinkType::Pci, bw::kPciGen4x16);
  return self;
}

// CPU0 - switch - {GPU 0000:3c:00.0, NIC mlx5_0 port 1 at 0000:3b:00.0};
// CPU1 (across the CPU interconnect) - eth0 (no PCI function).
struct TwoSocketHost {
  CommTopology ct;
  int gpu = -1, cpu0 = -1;
  TwoSocketHost() {
    Topology t;
    Node cpu;
    cpu.type = NodeType::Cpu;
    cpu.numa = 0;
    cpu0 = t.addNode(cpu);
    cpu.numa = 1;
    const int cpu1 = t.addNode(cpu);
    t.addLink(cpu0, cpu1, LinkType::Smp, bw::kSmpIntel);
    const int sw = addPciNode(&t, NodeType::PciSwitch, "0000:3a:00.0", "", 1, cpu0);
    gpu = addPciNode(&t, NodeType::Gpu, "0000:3c:00.0", "", 1, sw);
    t.nodes[gpu].cudaDev = 0;
    t.nodes[gpu].rank = 0;
    addPciNode(&t, NodeType::Nic, "0000:3b:00.0", "mlx5_0", 1, sw);
    addPciNode(&t, NodeType::Nic, "", "eth0", 0, cpu1);
    t.computePaths();
    ct.hosts.push_back(std::move(t));
    ct.hostHashes.push_back(1);
    ct.ranks.push_back(RankPlace{0, gpu, 0});
    ct.ranks.push_back(RankPlace{0, cpu0, 1});  // a host-mode rank on the same host
  }
};

PathType route(const GpuNicRoutes& r, const char* name, const char* pciPath) {
  PathType t = PathType::DIS;
  EXPECT_TRUE(routeToNetDevice(r, name, pciPath, &t));
  return t;
}

TEST(GpuNicRoutes, ListsEveryNicWithItsPathFromTheGpu) {
  TwoSocketHost h;
  const GpuNicRoutes r = gpuNicRoutes(h.ct, 0);
  ASSERT_TRUE(r.known);
  ASSERT_EQ(r.nics.size(), 2u);
  EXPECT_EQ(r.nics[0].name, "mlx5_0");
  EXPECT_EQ(r.nics[0].type, h.ct.hosts[0].path(h.gpu, h.ct.hosts[0].findByBusId("0000:3b:00.0")).type);
  EXPECT_LT(r.nics[0].type, PathType::PHB);  // under the GPU's own switch
  EXPECT_EQ(r.nics[1].type, PathType::SYS);  // behind the other CPU
  EXPECT_EQ(r.unlisted, h.ct.hosts[0].path(h.gpu, h.cpu0).type);
  EXPECT_EQ(r.unlisted, PathType::PHB);
}

TEST(GpuNicRoutes, MatchesByPciFunctionFirst) {
  TwoSocketHost h;
  const GpuNicRoutes r = gpuNicRoutes(h.ct, 0);
  // The sysfs path names the NIC's function; the device name is a plugin's own.
  EXPECT_EQ(route(r, "efa_0", "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"), r.nics[0].type);
  // A short bus id in the path is the same function.
  EXPECT_EQ(route(r, nullptr, "/sys/devices/pci0000:3a/0000:3a:00.0/3b:00.0"), r.nics[0].type);
}

TEST(GpuNicRoutes, MatchesByNameAndPort) {
  TwoSocketHost h;
  const GpuNicRoutes r = gpuNicRoutes(h.ct, 0);
  EXPECT_EQ(route(r, "mlx5_0:1", nullptr), r.nics[0].type);
  EXPECT_EQ(route(r, "eth0", ""), PathType::SYS);
  EXPECT_EQ(route(r, "mlx5_0:2", nullptr), PathType::PHB);  // no such port: off the GPU's CPU
}

TEST(GpuNicRoutes, AnUnlistedDeviceHangsOffTheGpusCpu) {
  TwoSocketHost h;
  const GpuNicRoutes r = gpuNicRoutes(h.ct, 0);
  EXPECT_EQ(route(r, "TestNet", nullptr), PathType::PHB);
  EXPECT_EQ(route(r, nullptr, "/sys/devices/virtual/net/veth0"), PathType::PHB);
}

TEST(GpuNicRoutes, UnknownWithoutAGpuRank) {
  TwoSocketHost h;
  PathType t = PathType::LOC;
  EXPECT_FALSE(gpuNicRoutes(h.ct, 1).known);  // host-mode rank
  EXPECT_FALSE(routeToNetDevice(gpuNicRoutes(h.ct, 1), "mlx5_0:1", nullptr, &t));
  EXPECT_EQ(t, PathType::LOC);                // untouched
  EXPECT_FALSE(gpuNicRoutes(h.ct, 7).known);  // no such rank
  EXPECT_FALSE(gpuNicRoutes(CommTopology{}, 0).known);
}

}  // namespace
}  // namespace chorus::topo
