// GPU discovery through NVML, opened with dlopen at run time so that the
// library loads (and host mode works) on machines without the driver. Only
// the handful of NVML entry points and types used here are declared, from the
// documented ABI; nvml.h is not needed.
//
// NVLink: each enabled link's remote end is either a GPU (a direct link,
// counted per peer) or an NVSwitch; NVSwitch links are counted in
// Node::nvSwitchLinks and turned into GPU-GPU links by
// connectNvSwitchFabric (see topology.h). cudaDev numbers follow PCI bus-id
// order (CUDA_DEVICE_ORDER=PCI_BUS_ID); CUDA_VISIBLE_DEVICES given as a list
// of indices selects and renumbers GPUs in that order.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/log.h"
#include "topo/discover_sources.h"
#include "topo/topology_build.h"

namespace chorus::topo::detail {

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDeviceOpaque*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;
constexpr int kNvmlRemoteGpu = 0;
constexpr int kNvmlRemoteSwitch = 2;

struct NvmlPciInfo {  // nvmlPciInfo_t, as filled by nvmlDeviceGetPciInfo_v3
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pciInfo)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;

  template <typename F>
  bool sym(F* fn, const char* name) {
    *fn = reinterpret_cast<F>(dlsym(lib, name));
    return *fn != nullptr;
  }

  bool open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    bool ok = sym(&init, "nvmlInit_v2") && sym(&count, "nvmlDeviceGetCount_v2") &&
              sym(&handle, "nvmlDeviceGetHandleByIndex_v2") && sym(&pciInfo, "nvmlDeviceGetPciInfo_v3") &&
              sym(&capability, "nvmlDeviceGetCudaComputeCapability");
    sym(&shutdown, "nvmlShutdown");
    sym(&linkState, "nvmlDeviceGetNvLinkState");
    sym(&remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    sym(&remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
    return ok && init() == kNvmlSuccess;
  }

  ~Nvml() {
    if (lib == nullptr) return;
    if (shutdown != nullptr && init != nullptr) shutdown();
    dlclose(lib);
  }
};

struct FoundGpu {
  nvmlDevice_t dev;
  std::string busId;
  int sm;
};

// CUDA_VISIBLE_DEVICES as a list of indices into bus-id order; empty if unset or not numeric.
std::vector<int> visibleOrder(size_t ngpus) {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<int> order;
  if (env == nullptr) {
    for (size_t i = 0; i < ngpus; ++i) order.push_back(static_cast<int>(i));
    return order;
  }
  std::string s = env;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v >= static_cast<long>(ngpus))
      break;  // CUDA stops at the first invalid entry
    order.push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return order;
}

void countNvLinks(const Nvml& nvml, Topology* t, const FoundGpu& g, int self,
                  std::map<std::pair<int, int>, int>* direct) {
  if (nvml.linkState == nullptr || nvml.remotePci == nullptr) return;
  for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
    int active = 0;
    if (nvml.linkState(g.dev, link, &active) != kNvmlSuccess || active == 0) continue;
    NvmlPciInfo remote{};
    if (nvml.remotePci(g.dev, link, &remote) != kNvmlSuccess) continue;
    remote.busId[sizeof(remote.busId) - 1] = '\0';
    int peer = t->findByBusId(remote.busId);
    int type = peer >= 0 && t->nodes[peer].type == NodeType::Gpu ? kNvmlRemoteGpu : kNvmlRemoteSwitch;
    if (nvml.remoteType != nullptr) nvml.remoteType(g.dev, link, &type);
    if (type == kNvmlRemoteSwitch) {
      ++t->nodes[self].nvSwitchLinks;
    } else if (type == kNvmlRemoteGpu && peer >= 0 && peer != self) {
      ++(*direct)[std::make_pair(std::min(self, peer), std::max(self, peer))];
    }
  }
}

}  // namespace

void discoverGpus(const DiscoveryOptions& opts, Topology* t) {
  if (!opts.useNvml || !opts.sysRoot.empty()) return;
  Nvml nvml;
  if (!nvml.open()) {
    CHORUS_INFO(kLogGraph, "NVML not available (%s); no GPUs in the topology",
                dlerror() ? "dlopen failed" : "init failed");
    return;
  }
  unsigned n = 0;
  if (nvml.count(&n) != kNvmlSuccess) n = 0;
  std::vector<FoundGpu> gpus;
  for (unsigned i = 0; i < n; ++i) {
    FoundGpu g{};
    NvmlPciInfo pci{};
    int major = 0, minor = 0;
    if (nvml.handle(i, &g.dev) != kNvmlSuccess || nvml.pciInfo(g.dev, &pci) != kNvmlSuccess) continue;
    pci.busId[sizeof(pci.busId) - 1] = '\0';
    g.busId = normalizeBusId(pci.busId);
    if (g.busId.empty()) continue;
    if (nvml.capability(g.dev, &major, &minor) == kNvmlSuccess) g.sm = major * 10 + minor;
    gpus.push_back(g);
  }
  std::sort(gpus.begin(), gpus.end(), [](const FoundGpu& a, const FoundGpu& b) { return a.busId < b.busId; });
  std::vector<int> order = visibleOrder(gpus.size());
  std::vector<std::pair<const FoundGpu*, int>> placed;  // (gpu, node)
  for (size_t cuda = 0; cuda < order.size(); ++cuda) {
    const FoundGpu& g = gpus[order[cuda]];
    PciPlacement p = placePciDevice(opts, t, g.busId);
    Node node;
    node.type = NodeType::Gpu;
    node.busId = g.busId;
    node.numa = p.numa;
    node.cudaDev = static_cast<int>(cuda);
    node.smVersion = g.sm;
    node.gdr = g.sm >= 60;
    int self = t->addNode(node);
    if (p.parent >= 0) t->addLink(self, p.parent, LinkType::Pci, p.bwGBs);
    placed.emplace_back(&g, self);
  }
  std::map<std::pair<int, int>, int> direct;  // both ends report a direct link: counted twice
  for (const auto& [g, self] : placed) countNvLinks(nvml, t, *g, self, &direct);
  for (const auto& [pair, twice] : direct) topo::addNvLinks(t, pair.first, pair.second, std::max(1, twice / 2));
  connectNvSwitchFabric(t);
  CHORUS_INFO(kLogGraph, "NVML: %u GPUs, %zu visible", n, placed.size());
}

}  // namespace chorus::topo::detail
