// CPU / NUMA discovery: one CPU node per NUMA node that has CPUs, from
// /sys/devices/system/node/node<N>/cpulist, or from hwloc (first when
// CHORUS_TOPO_HWLOC=1, else when sysfs says nothing); if neither says
// anything, one node with every online CPU.
#include <dirent.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/log.h"
#include "topo/discover_sources.h"
#include "topo/topology_build.h"

#ifdef CHORUS_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace chorus::topo::detail {

namespace {

struct CpuIdentity {
  std::string arch, vendor;
  int family = 0, model = 0;
};

CpuIdentity cpuIdentity(const DiscoveryOptions& opts) {
  CpuIdentity id;
  struct utsname u;
  if (opts.sysRoot.empty() && uname(&u) == 0) id.arch = u.machine;
  std::ifstream in(opts.sysRoot.empty() ? "/proc/cpuinfo" : opts.sysRoot + "/proc/cpuinfo");
  std::string line;
  auto value = [](const std::string& l) {
    size_t p = l.find(':');
    if (p == std::string::npos) return std::string();
    while (++p < l.size() && l[p] == ' ') {
    }
    return l.substr(p);
  };
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the first processor is enough
    if (line.rfind("vendor_id", 0) == 0) id.vendor = value(line);
    if (line.rfind("cpu family", 0) == 0) id.family = std::atoi(value(line).c_str());
    if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) id.model = std::atoi(value(line).c_str());
  }
  return id;
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
std::vector<int> parseCpuList(const std::string& text) {
  std::vector<int> cpus;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int lo = 0, hi = 0;
    if (std::sscanf(item.c_str(), "%d-%d", &lo, &hi) == 2 ||
        (std::sscanf(item.c_str(), "%d", &lo) == 1 && (hi = lo, true)))
      for (int c = lo; c <= hi && c - lo < 65536; ++c) cpus.push_back(c);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return cpus;
}

void addCpu(Topology* t, const CpuIdentity& id, int numa, const std::vector<int>& cpus) {
  Node n;
  n.type = NodeType::Cpu;
  n.numa = numa;
  n.arch = id.arch;
  n.vendor = id.vendor;
  n.familyId = id.family;
  n.modelId = id.model;
  n.affinity = cpuMaskString(cpus);
  n.cores = static_cast<int>(cpus.size());
  t->addNode(n);
}

#ifdef CHORUS_HAVE_HWLOC
bool cpusFromHwloc(const CpuIdentity& id, Topology* t) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return false;
  bool ok = hwloc_topology_load(topo) == 0;
  int nnuma = ok ? hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) : 0;
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    std::vector<int> cpus;
    unsigned cpu = 0;
    hwloc_bitmap_foreach_begin(cpu, obj->cpuset) cpus.push_back(static_cast<int>(cpu));
    hwloc_bitmap_foreach_end();
    if (!cpus.empty()) addCpu(t, id, static_cast<int>(obj->os_index), cpus);
  }
  hwloc_topology_destroy(topo);
  if (!ok) CHORUS_INFO(kLogGraph, "hwloc could not load the machine topology; using sysfs");
  return !t->nodesOfType(NodeType::Cpu).empty();
}
#endif

bool cpusFromSysfs(const DiscoveryOptions& opts, const CpuIdentity& id, Topology* t) {
  std::string dir = opts.sysRoot + "/sys/devices/system/node";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  std::vector<int> numas;
  while (dirent* e = readdir(d)) {
    int numa = -1;
    char tail = 0;
    if (std::sscanf(e->d_name, "node%d%c", &numa, &tail) == 1 && numa >= 0) numas.push_back(numa);
  }
  closedir(d);
  std::sort(numas.begin(), numas.end());
  for (int numa : numas) {
    std::vector<int> cpus = parseCpuList(readFirstLine(dir + "/node" + std::to_string(numa) + "/cpulist"));
    if (!cpus.empty()) addCpu(t, id, numa, cpus);  // memory-only nodes (CXL, HBM) hold no ranks
  }
  return !t->nodesOfType(NodeType::Cpu).empty();
}

}  // namespace

void discoverCpus(const DiscoveryOptions& opts, Topology* t) {
  CpuIdentity id = cpuIdentity(opts);
#ifdef CHORUS_HAVE_HWLOC
  // hwloc reads the same sysfs files but costs 30-50 ms per process (it loads
  // its I/O plugins on every topology load), so it is the fallback unless asked for.
  bool hwlocUsable = opts.useHwloc && opts.sysRoot.empty();
  if (hwlocUsable && opts.preferHwloc && cpusFromHwloc(id, t)) return;
  if (cpusFromSysfs(opts, id, t)) return;
  if (hwlocUsable && !opts.preferHwloc && cpusFromHwloc(id, t)) return;
#else
  if (cpusFromSysfs(opts, id, t)) return;
#endif
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<int> cpus;
  for (long c = 0; c < std::max(online, 1L); ++c) cpus.push_back(static_cast<int>(c));
  CHORUS_INFO(kLogGraph, "no NUMA information; assuming one CPU node with %zu CPUs", cpus.size());
  addCpu(t, id, 0, cpus);
}

}  // namespace chorus::topo::detail
