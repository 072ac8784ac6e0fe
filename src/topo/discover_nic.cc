// NIC discovery. RDMA devices come from /sys/class/infiniband/<dev>/ports/<p>
// (one NIC node per ACTIVE port; link_layer tells InfiniBand from RoCE, both
// are rdma). Socket NICs come from /sys/class/net: loopback only when it is
// the only interface, interfaces that are down are skipped, and netdevs that
// sit on the PCI function of an RDMA device are not listed twice. Interfaces
// without a PCI device (virtual, or a paravirtual bus) hang off a CPU node.
#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "core/log.h"
#include "topo/discover_sources.h"

namespace chorus::topo::detail {

namespace {

constexpr double kDefaultSocketMbps = 10000;

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// "100 Gb/sec (4X EDR)" -> 100
double rateGbps(const std::string& rate) { return std::strtod(rate.c_str(), nullptr); }

// "0c42:a103:00b3:c000" -> 0x0c42a10300b3c000
uint64_t parseGuid(const std::string& text) {
  std::string hex;
  for (char c : text)
    if (c != ':') hex.push_back(c);
  return hex.empty() ? 0 : std::strtoull(hex.c_str(), nullptr, 16);
}

bool gpuDirectLoaded(const DiscoveryOptions& opts) {
  return !resolvePath(opts.sysRoot + "/sys/module/nvidia_peermem").empty() ||
         !resolvePath(opts.sysRoot + "/sys/kernel/mm/memory_peers/nv_mem/version").empty();
}

// Links the NIC to its place: under its PCI parent, or to a CPU node.
void attach(const DiscoveryOptions& opts, Topology* t, Node n, const std::string& pciFn, int numaHint) {
  if (!pciFn.empty()) {
    PciPlacement p = placePciDevice(opts, t, pciFn);
    n.busId = pciFn;
    n.numa = p.numa;
    int self = t->addNode(n);
    if (p.parent >= 0) t->addLink(self, p.parent, LinkType::Pci, p.bwGBs);
    return;
  }
  int cpu = cpuForNuma(*t, numaHint);
  n.numa = cpu >= 0 ? t->nodes[cpu].numa : 0;
  int self = t->addNode(n);
  if (cpu >= 0) t->addLink(self, cpu, LinkType::Pci, std::max(n.speedGBs, bw::kPciGen4x16));
}

void discoverRdma(const DiscoveryOptions& opts, Topology* t, std::set<std::string>* rdmaFunctions) {
  std::string root = opts.sysRoot + "/sys/class/infiniband";
  bool gdr = gpuDirectLoaded(opts);
  for (const std::string& dev : listDir(root)) {
    std::string pciFn = pciFunctionInPath(resolvePath(root + "/" + dev + "/device"));
    uint64_t guid = parseGuid(readFirstLine(root + "/" + dev + "/node_guid"));
    for (const std::string& port : listDir(root + "/" + dev + "/ports")) {
      std::string portDir = root + "/" + dev + "/ports/" + port;
      if (readFirstLine(portDir + "/state").find("ACTIVE") == std::string::npos) continue;
      Node n;
      n.type = NodeType::Nic;
      n.name = dev;
      n.port = std::atoi(port.c_str());
      n.guid = guid;
      n.rdma = true;
      n.gdr = gdr;
      n.speedGBs = rateGbps(readFirstLine(portDir + "/rate")) / 8.0;
      CHORUS_INFO(kLogGraph, "NIC %s port %s: %s, %.0f Gb/s", dev.c_str(), port.c_str(),
                  readFirstLine(portDir + "/link_layer").c_str(), n.speedGBs * 8);
      attach(opts, t, n, pciFn, 0);
      if (!pciFn.empty()) rdmaFunctions->insert(pciFn);
    }
  }
}

void discoverSockets(const DiscoveryOptions& opts, Topology* t, const std::set<std::string>& rdmaFunctions) {
  std::string root = opts.sysRoot + "/sys/class/net";
  IfnameFilter filter = IfnameFilter::parse(opts.ifname);
  std::vector<std::string> names;
  for (const std::string& ifc : listDir(root)) {
    if (!opts.ifname.empty() && !filter.matches(ifc)) continue;
    if (readFirstLine(root + "/" + ifc + "/operstate") == "down") continue;
    names.push_back(ifc);
  }
  bool onlyLoopback = std::all_of(names.begin(), names.end(), [](const std::string& s) { return s == "lo"; });
  for (const std::string& ifc : names) {
    if (ifc == "lo" && !onlyLoopback) continue;
    std::string real = resolvePath(root + "/" + ifc);
    std::string pciFn = pciFunctionInPath(real);
    if (!pciFn.empty() && rdmaFunctions.count(pciFn) != 0) continue;
    Node n;
    n.type = NodeType::Nic;
    n.name = ifc;
    n.port = 0;
    long mbps = readLong(root + "/" + ifc + "/speed", -1);
    if (mbps <= 0) {
      CHORUS_INFO(kLogGraph, "NIC %s reports no speed; assuming %.0f Mb/s", ifc.c_str(), kDefaultSocketMbps);
      mbps = static_cast<long>(kDefaultSocketMbps);
    }
    n.speedGBs = mbps / 8000.0;
    int numa = static_cast<int>(readLong(root + "/" + ifc + "/device/numa_node", 0));
    attach(opts, t, n, pciFn, numa);
  }
}

}  // namespace

void discoverNics(const DiscoveryOptions& opts, Topology* t) {
  std::set<std::string> rdmaFunctions;
  discoverRdma(opts, t, &rdmaFunctions);
  discoverSockets(opts, t, rdmaFunctions);
  if (t->nodesOfType(NodeType::Nic).empty()) CHORUS_INFO(kLogGraph, "no network interface found");
}

}  // namespace chorus::topo::detail
