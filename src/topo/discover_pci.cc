// The PCI tree above a device, from sysfs. /sys/bus/pci/devices/<busid>
// resolves to /sys/devices/pci<dom>:<bus>/<root port>/<bridge>.../<busid>.
// The bridges strictly between the root port and the device are PCIe switch
// ports: a physical switch shows up as an upstream port followed by a
// downstream port, so every other bridge (the upstream ones) becomes one
// PciSwitch node, identified by the upstream port's bus id; devices below
// different downstream ports of one switch therefore share that node.
#include <limits.h>
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "topo/discover_sources.h"
#include "topo/xml_read.h"

namespace chorus::topo::detail {

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

long readLong(const std::string& path, long fallback) {
  std::string s = readFirstLine(path);
  if (s.empty()) return fallback;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 0);
  return end == s.c_str() ? fallback : v;
}

std::string resolvePath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

namespace {

std::vector<std::string> pciComponents(const std::string& path) {
  std::vector<std::string> ids;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    std::string part = path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (!normalizeBusId(part).empty() && part.find(':') != std::string::npos) ids.push_back(normalizeBusId(part));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return ids;
}

double linkBw(const std::string& dir) {
  std::string speed = readFirstLine(dir + "/current_link_speed");
  long width = readLong(dir + "/current_link_width", 0);
  return pciLinkBwGBs(speed, static_cast<int>(width), bw::kPciGen4x16);
}

}  // namespace

std::string pciFunctionInPath(const std::string& path) {
  std::vector<std::string> ids = pciComponents(path);
  return ids.empty() ? "" : ids.back();
}

int cpuForNuma(const Topology& t, int numa) {
  std::vector<int> cpus = t.nodesOfType(NodeType::Cpu);
  for (int c : cpus)
    if (t.nodes[c].numa == numa) return c;
  return cpus.empty() ? -1 : cpus.front();
}

PciPlacement placePciDevice(const DiscoveryOptions& opts, Topology* t, const std::string& busId) {
  PciPlacement p;
  std::string devDir = opts.sysRoot + "/sys/bus/pci/devices/" + busId;
  std::string real = resolvePath(devDir);
  p.numa = static_cast<int>(readLong(devDir + "/numa_node", -1));
  int cpu = cpuForNuma(*t, p.numa);
  p.numa = cpu >= 0 ? t->nodes[cpu].numa : 0;
  p.parent = cpu;
  p.bwGBs = linkBw(devDir);
  std::vector<std::string> chain = pciComponents(real);
  // chain: root port, bridges..., device. Upstream switch ports sit at even offsets after the root port.
  std::string prefix = real.substr(0, real.find("/" + (chain.empty() ? busId : chain.front())));
  std::string dir = prefix;
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    dir += "/" + chain[i];
    if (i == 0 || (i - 1) % 2 != 0) continue;
    int sw = t->findByBusId(chain[i]);
    if (sw < 0) {
      Node n;
      n.type = NodeType::PciSwitch;
      n.busId = chain[i];
      n.numa = p.numa;
      sw = t->addNode(n);
      if (p.parent >= 0) t->addLink(sw, p.parent, LinkType::Pci, linkBw(dir));
    }
    p.parent = sw;
  }
  return p;
}

}  // namespace chorus::topo::detail
