// Discovery orchestration and the per-process LocalTopologyCache.
#include "topo/discover.h"

#include <sched.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "core/log.h"
#include "core/params.h"
#include "core/result.h"
#include "topo/discover_sources.h"
#include "topo/topology_build.h"
#include "topo/xml_read.h"
#include "topo/xml_write.h"

namespace chorus::topo {

ncclResult_t discoverTopology(const DiscoveryOptions& opts, Topology* out) {
  Topology t;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) t.hostName = host;
  detail::discoverCpus(opts, &t);
  detail::discoverGpus(opts, &t);
  detail::discoverNics(opts, &t);
  linkCpuSockets(&t);
  t.computePaths();
  CHORUS_INFO(kLogGraph, "discovered topology: %zu CPU nodes, %zu GPUs, %zu NICs, %zu PCI switches",
              t.nodesOfType(NodeType::Cpu).size(), t.nodesOfType(NodeType::Gpu).size(),
              t.nodesOfType(NodeType::Nic).size(), t.nodesOfType(NodeType::PciSwitch).size());
  *out = std::move(t);
  return ncclSuccess;
}

namespace {

// The one process-wide store of local topologies, keyed by the NCCL_TOPO_FILE
// value they came from ("" = discovered). Entries are immutable once made.
class LocalTopologyCache {
 public:
  static LocalTopologyCache& instance() {
    static LocalTopologyCache cache;
    return cache;
  }

  ncclResult_t get(const std::string& file, std::shared_ptr<const LocalTopology>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(file);
    if (it != entries_.end()) {
      *out = it->second;
      return ncclSuccess;
    }
    auto made = std::make_shared<LocalTopology>();
    if (file.empty()) {
      DiscoveryOptions opts;
      opts.ifname = params::socketIfname();
      opts.preferHwloc = params::topoHwloc() != 0;
      CHORUS_CHECK(discoverTopology(opts, &made->topo));
      made->source = "discovered";
    } else {
      CHORUS_CHECK(loadTopologyXml(file, &made->topo));
      made->source = file;
    }
    made->xml = topologyToXml(made->topo);
    entries_[file] = made;
    *out = made;
    return ncclSuccess;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const LocalTopology>> entries_;
};

}  // namespace

ncclResult_t localTopology(std::shared_ptr<const LocalTopology>* out) {
  return LocalTopologyCache::instance().get(params::topoFile(), out);
}

int callerCpuNode(const Topology& topo) {
  std::vector<int> cpus = topo.nodesOfType(NodeType::Cpu);
  if (cpus.empty()) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus.front();
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c)
    if (CPU_ISSET(c, &set)) first = c;
  if (first < 0) return cpus.front();
  for (int node : cpus) {
    for (int c : cpusInMask(topo.nodes[node].affinity))
      if (c == first) return node;
  }
  return cpus.front();
}

}  // namespace chorus::topo
