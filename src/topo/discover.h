// Discovery of the local machine's Topology, and the per-process cache of it.
//
// Sources, each in its own file and each optional: CPUs/NUMA nodes
// (/sys/devices/system/node, or hwloc: see discover_cpu.cc), the PCI tree above
// every device of interest (sysfs parent chain), NICs (/sys/class/net and
// /sys/class/infiniband) and GPUs (NVML, loaded at run time). A missing source
// never fails discovery: the result then has fewer nodes (at least one CPU
// node holding every online core) and an INFO line says why.
#pragma once

#include <memory>
#include <string>

#include "nccl.h"
#include "topo/topology.h"

namespace chorus::topo {

struct DiscoveryOptions {
  std::string sysRoot;       // prefix for /sys paths ("" = the real /sys); tests point it at a fake tree
  bool useHwloc = true;      // only with CHORUS_HAVE_HWLOC and an empty sysRoot
  bool preferHwloc = false;  // hwloc before sysfs (CHORUS_TOPO_HWLOC); else hwloc only when sysfs says nothing
  bool useNvml = true;       // only with an empty sysRoot
  std::string ifname;        // NCCL_SOCKET_IFNAME-style filter for socket NICs ("" = defaults)
};

// Fills `out` (with paths computed). Never fails on missing information.
ncclResult_t discoverTopology(const DiscoveryOptions& opts, Topology* out);

// The local host as seen by this process: loaded from NCCL_TOPO_FILE when set,
// else discovered. Computed once per process (per NCCL_TOPO_FILE value) and
// shared; `xml` is its serialized form for exchange with other hosts.
struct LocalTopology {
  Topology topo;
  std::string xml;
  std::string source;  // "discovered" or the file name
};
ncclResult_t localTopology(std::shared_ptr<const LocalTopology>* out);

// The CPU (NUMA) node of `topo` the calling thread runs on: the one whose
// affinity holds the first CPU of sched_getaffinity, else the first CPU node.
int callerCpuNode(const Topology& topo);

}  // namespace chorus::topo
