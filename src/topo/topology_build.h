// Construction steps shared by every source of a Topology (the XML reader,
// discovery, synthetic generators): NVLink bookkeeping and the CPU
// interconnect, so that a machine read from a file and the same machine
// discovered live come out identical.
#pragma once

#include "topo/topology.h"

namespace chorus::topo {

// Adds `lanes` NVLinks between GPU `a` and node `b` (a GPU, or a CPU for
// NVLink-attached CPUs), folding into an existing NvLink link if there is one.
void addNvLinks(Topology* t, int a, int b, int lanes);
// Joins every pair of GPUs with Node::nvSwitchLinks > 0 through the fabric
// (see Node::nvSwitchLinks). Call once, after all GPUs are known.
void connectNvSwitchFabric(Topology* t);
// Joins every pair of CPU nodes with an Smp link (bandwidth by vendor).
void linkCpuSockets(Topology* t);
// Number of CPUs in an affinity mask as sysfs writes it ("ff,ffffffff").
int countMaskBits(const std::string& mask);
// The mask string (sysfs format: comma-separated 32-bit hex words, most
// significant first) with the given CPU ids set; and its inverse.
std::string cpuMaskString(const std::vector<int>& cpus);
std::vector<int> cpusInMask(const std::string& mask);

}  // namespace chorus::topo
