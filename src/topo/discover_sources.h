// The individual discovery sources behind discover.h (internal to src/topo).
#pragma once

#include <string>

#include "topo/discover.h"

namespace chorus::topo::detail {

// CPU/NUMA nodes; always adds at least one.
void discoverCpus(const DiscoveryOptions& opts, Topology* t);
void discoverGpus(const DiscoveryOptions& opts, Topology* t);
void discoverNics(const DiscoveryOptions& opts, Topology* t);

// Where a PCI device hangs: the PCI switches between it and its root port are
// added (once) as PciSwitch nodes; returns the node to link the device to, the
// device's link bandwidth and its NUMA node.
struct PciPlacement {
  int parent = -1;
  double bwGBs = bw::kPciGen4x16;
  int numa = -1;
};
PciPlacement placePciDevice(const DiscoveryOptions& opts, Topology* t, const std::string& busId);
// The CPU node for a NUMA id (first CPU node if none matches).
int cpuForNuma(const Topology& t, int numa);
// Nearest PCI function in a resolved sysfs path ("" if none): .../0000:00:02.0/virtio2/net/eth0 -> 0000:00:02.0.
std::string pciFunctionInPath(const std::string& path);

// Small sysfs readers; "" / fallback when missing.
std::string readFirstLine(const std::string& path);
long readLong(const std::string& path, long fallback);
std::string resolvePath(const std::string& path);

}  // namespace chorus::topo::detail
