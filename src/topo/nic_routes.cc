#include "topo/nic_routes.h"

#include <cstdlib>

#include "topo/discover_sources.h"

namespace chorus::topo {
namespace {

// "mlx5_0:1" -> ("mlx5_0", 1); "eth0" -> ("eth0", -1: any port).
void splitDeviceName(const std::string& text, std::string* name, int* port) {
  const size_t colon = text.rfind(':');
  *port = -1;
  *name = text;
  if (colon == std::string::npos || colon + 1 == text.size()) return;
  char* end = nullptr;
  const long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0') return;
  *name = text.substr(0, colon);
  *port = static_cast<int>(p);
}

const NicRoute* byBusId(const GpuNicRoutes& routes, const char* pciPath) {
  if (pciPath == nullptr || *pciPath == '\0') return nullptr;
  const std::string fn = normalizeBusId(detail::pciFunctionInPath(pciPath));
  if (fn.empty()) return nullptr;
  for (const NicRoute& r : routes.nics)
    if (!r.busId.empty() && normalizeBusId(r.busId) == fn) return &r;
  return nullptr;
}

const NicRoute* byName(const GpuNicRoutes& routes, const char* devName) {
  if (devName == nullptr || *devName == '\0') return nullptr;
  std::string name;
  int port = -1;
  splitDeviceName(devName, &name, &port);
  for (const NicRoute& r : routes.nics)
    if (r.name == name && (port < 0 || r.port == port)) return &r;
  return nullptr;
}

}  // namespace

GpuNicRoutes gpuNicRoutes(const CommTopology& t, int rank) {
  GpuNicRoutes out;
  if (rank < 0 || rank >= t.nranks()) return out;
  const RankPlace& place = t.ranks[rank];
  if (place.host < 0 || place.host >= t.nhosts()) return out;
  const Topology& host = t.hosts[place.host];
  if (place.device < 0 || place.device >= static_cast<int>(host.nodes.size()) ||
      host.nodes[place.device].type != NodeType::Gpu || host.paths.size() != host.nodes.size())
    return out;
  out.known = true;
  for (int nic : host.nodesOfType(NodeType::Nic)) {
    const Node& n = host.nodes[nic];
    out.nics.push_back(NicRoute{n.busId, n.name, n.port, host.path(place.device, nic).type});
  }
  const int cpu = host.cpuOf(place.device);
  out.unlisted = cpu >= 0 ? host.path(place.device, cpu).type : PathType::SYS;
  return out;
}

bool routeToNetDevice(const GpuNicRoutes& routes, const char* devName, const char* pciPath, PathType* type) {
  if (!routes.known) return false;
  const NicRoute* r = byBusId(routes, pciPath);
  if (r == nullptr) r = byName(routes, devName);
  *type = r != nullptr ? r->type : routes.unlisted;
  return true;
}

}  // namespace chorus::topo
