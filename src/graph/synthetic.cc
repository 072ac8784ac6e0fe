#include "graph/synthetic.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace chorus::graph {
namespace {

using topo::Link;
using topo::LinkType;
using topo::Node;
using topo::NodeType;
using topo::Topology;

// Nodes and links are appended directly so that generators do not depend on
// how a loader builds its topologies.
int pushNode(Topology& t, NodeType type, int numa) {
  Node n;
  n.type = type;
  n.numa = numa;
  int sameType = 0;
  for (const Node& other : t.nodes) sameType += other.type == type;
  n.index = sameType;
  t.nodes.push_back(n);
  return static_cast<int>(t.nodes.size()) - 1;
}

void pushLink(Topology& t, int a, int b, LinkType type, double bw, int count = 1, bool viaNvSwitch = false) {
  Link l;
  l.from = a;
  l.to = b;
  l.type = type;
  l.bwGBs = bw;
  l.count = count;
  l.viaNvSwitch = viaNvSwitch;
  t.links.push_back(l);
  std::swap(l.from, l.to);
  t.links.push_back(l);
}

char hexDigit(int v) { return "0123456789abcdef"[v & 15]; }

std::string busId(int bus) {
  std::string s = "0000:00:00.0";
  s[5] = hexDigit(bus >> 4);
  s[6] = hexDigit(bus);
  return s;
}

int addCpu(Topology& t, int numa) {
  int id = pushNode(t, NodeType::Cpu, numa);
  Node& n = t.nodes[id];
  n.arch = "x86_64";
  n.vendor = "GenuineIntel";
  n.cores = 32;
  return id;
}

int addGpu(Topology& t, int cudaDev, int numa) {
  int id = pushNode(t, NodeType::Gpu, numa);
  Node& n = t.nodes[id];
  n.cudaDev = cudaDev;
  n.smVersion = 90;
  n.gdr = true;
  n.busId = busId(0x10 + cudaDev * 8);
  return id;
}

int addNic(Topology& t, int index, int numa, double speed, bool rdma) {
  int id = pushNode(t, NodeType::Nic, numa);
  Node& n = t.nodes[id];
  n.name = rdma ? "mlx5_" + std::to_string(index) : "eth" + std::to_string(index);
  n.speedGBs = speed;
  n.rdma = rdma;
  n.gdr = rdma;
  n.busId = busId(0x80 + index * 4);
  return id;
}

int addSwitch(Topology& t, int numa, int parentCpu, double bw) {
  int id = pushNode(t, NodeType::PciSwitch, numa);
  t.nodes[id].busId = busId(0x40 + t.nodes[id].index);
  pushLink(t, id, parentCpu, LinkType::Pci, bw);
  return id;
}

int defaultNics(SyntheticShape s, int perHost) {
  switch (s) {
    case SyntheticShape::NvSwitch:
      return perHost;
    case SyntheticShape::Pcie:
      return 2;
    default:
      return 1;
  }
}

// GPUs in pairs under PCIe switches, the first half of the switches under
// CPU 0 and the rest under CPU 1 (or all under CPU 0 when there is one).
// NIC k sits under switch k * nswitch / nics.
void addPcieTree(Topology& t, int ngpu, int ncpu, int nics, double pciBw, double nicSpeed, bool rdma,
                 std::vector<int>* gpus) {
  std::vector<int> cpus;
  for (int c = 0; c < ncpu; ++c) cpus.push_back(addCpu(t, c));
  for (int c = 1; c < ncpu; ++c) pushLink(t, cpus[0], cpus[c], LinkType::Smp, topo::bw::kSmpIntel);
  const int nswitch = (ngpu + 1) / 2;
  std::vector<int> switches;
  for (int s = 0; s < nswitch; ++s) {
    const int numa = s * ncpu / nswitch;
    switches.push_back(addSwitch(t, numa, cpus[numa], pciBw));
  }
  for (int g = 0; g < ngpu; ++g) {
    const int sw = switches[g / 2];
    const int gpu = addGpu(t, g, t.nodes[sw].numa);
    pushLink(t, gpu, sw, LinkType::Pci, pciBw);
    gpus->push_back(gpu);
  }
  for (int k = 0; k < nics; ++k) {
    const int sw = switches[std::min(nswitch - 1, k * nswitch / nics)];
    const int nic = addNic(t, k, t.nodes[sw].numa, nicSpeed, rdma);
    pushLink(t, nic, sw, LinkType::Pci, pciBw);
  }
}

Topology hostOnly(const SyntheticSpec& spec, int nics) {
  Topology t;
  int c0 = addCpu(t, 0);
  int c1 = addCpu(t, 1);
  pushLink(t, c0, c1, LinkType::Smp, topo::bw::kSmpAmd);
  for (int k = 0; k < nics; ++k) {
    int nic = addNic(t, k, k % 2, spec.netBwGBs, false);
    pushLink(t, nic, k % 2 ? c1 : c0, LinkType::Pci, topo::bw::kPciGen4x16);
  }
  return t;
}

}  // namespace

const char* syntheticShapeName(SyntheticShape s) {
  switch (s) {
    case SyntheticShape::NvSwitch:
      return "nvswitch";
    case SyntheticShape::Pcie:
      return "pcie";
    case SyntheticShape::Pairwise:
      return "pairwise";
    case SyntheticShape::Mesh:
      return "mesh";
    case SyntheticShape::Host:
      return "host";
  }
  return "?";
}

topo::Topology syntheticHost(const SyntheticSpec& spec, int hostIndex) {
  const int nics = spec.nics >= 0 ? spec.nics : defaultNics(spec.shape, spec.perHost);
  const int g = spec.perHost;
  Topology t;
  t.hostName = "synthetic" + std::to_string(hostIndex);
  if (spec.shape == SyntheticShape::Host) {
    Topology h = hostOnly(spec, nics);
    h.hostName = t.hostName;
    return h;
  }
  std::vector<int> gpus;
  const double nvl = topo::bw::kNvLinkPerLink(90);
  switch (spec.shape) {
    case SyntheticShape::NvSwitch: {
      addPcieTree(t, g, 2, nics, topo::bw::kPciGen5x16, 50.0, true, &gpus);
      // The fabric as NCCL-format files describe it: one NVLink link per GPU
      // pair carrying the GPU's whole NVLink bandwidth, marked viaNvSwitch.
      const int links = spec.nvlinks > 0 ? spec.nvlinks : 18;
      for (int gpu : gpus) t.nodes[gpu].nvSwitchLinks = links;
      for (int a = 0; a < g; ++a)
        for (int b = a + 1; b < g; ++b) pushLink(t, gpus[a], gpus[b], LinkType::NvLink, nvl * links, links, true);
      break;
    }
    case SyntheticShape::Pcie:
      addPcieTree(t, g, 2, nics, topo::bw::kPciGen4x16, 12.5, true, &gpus);
      break;
    case SyntheticShape::Pairwise: {
      addPcieTree(t, g, 1, nics, topo::bw::kPciGen4x16, 12.5, true, &gpus);
      const int links = spec.nvlinks > 0 ? spec.nvlinks : 4;
      for (int a = 0; a + 1 < g; a += 2) pushLink(t, gpus[a], gpus[a + 1], LinkType::NvLink, nvl * links, links);
      break;
    }
    case SyntheticShape::Mesh: {
      // PCIe gen3, so that even one NVLink is the widest route between two GPUs.
      addPcieTree(t, g, 1, nics, topo::bw::kPciGen3x16, 12.5, true, &gpus);
      const int links = spec.nvlinks > 0 ? spec.nvlinks : 1;
      for (int a = 0; a < g; ++a)
        for (int b = a + 1; b < g; ++b) pushLink(t, gpus[a], gpus[b], LinkType::NvLink, nvl * links, links);
      break;
    }
    case SyntheticShape::Host:
      break;
  }
  return t;
}

topo::CommTopology syntheticCommTopology(const SyntheticSpec& spec) {
  topo::CommTopology ct;
  ct.netBwGBs = spec.netBwGBs;
  ct.netLatencyUs = spec.netLatencyUs;
  const int hosts = std::max(1, spec.hosts);
  const int g = std::max(1, spec.perHost);
  for (int h = 0; h < hosts; ++h) {
    ct.hosts.push_back(syntheticHost(spec, h));
    ct.hostHashes.push_back(0x5e00000000ull + static_cast<uint64_t>(h));
  }
  const int nranks = hosts * g;
  ct.ranks.resize(nranks);
  std::vector<int> filled(hosts, 0);
  for (int r = 0; r < nranks; ++r) {
    const int h = spec.roundRobin ? r % hosts : r / g;
    const int local = filled[h]++;
    const Topology& t = ct.hosts[h];
    topo::RankPlace& p = ct.ranks[r];
    p.host = h;
    p.localRank = local;
    if (spec.shape == SyntheticShape::Host) {
      // First half of a host's ranks on NUMA node 0, the rest on node 1.
      p.device = local < (g + 1) / 2 ? 0 : 1;  // node 0 and 1 are the two CPUs
    } else {
      int seen = 0;
      for (size_t i = 0; i < t.nodes.size(); ++i)
        if (t.nodes[i].type == NodeType::Gpu && seen++ == local) p.device = static_cast<int>(i);
    }
  }
  for (int r = 0; r < nranks; ++r) ct.hosts[ct.ranks[r].host].nodes[ct.ranks[r].device].rank = r;
  return ct;
}

topo::CommTopology replicateHost(const topo::Topology& host, int hosts, int perHost, bool roundRobin) {
  std::vector<int> gpus, cpus;
  for (size_t i = 0; i < host.nodes.size(); ++i) {
    if (host.nodes[i].type == NodeType::Gpu) gpus.push_back(static_cast<int>(i));
    if (host.nodes[i].type == NodeType::Cpu) cpus.push_back(static_cast<int>(i));
  }
  std::sort(gpus.begin(), gpus.end(), [&](int a, int b) { return host.nodes[a].cudaDev < host.nodes[b].cudaDev; });
  if (cpus.empty()) cpus.push_back(0);
  const int g = gpus.empty() ? std::max(1, perHost) : static_cast<int>(gpus.size());
  topo::CommTopology ct;
  hosts = std::max(1, hosts);
  for (int h = 0; h < hosts; ++h) {
    ct.hosts.push_back(host);
    ct.hosts.back().hostName =
        host.hostName.empty() ? "host" + std::to_string(h) : host.hostName + "#" + std::to_string(h);
    ct.hostHashes.push_back(0x7e00000000ull + static_cast<uint64_t>(h));
  }
  std::vector<int> filled(hosts, 0);
  for (int r = 0; r < hosts * g; ++r) {
    const int h = roundRobin ? r % hosts : r / g;
    topo::RankPlace p;
    p.host = h;
    p.localRank = filled[h]++;
    p.device = gpus.empty() ? cpus[static_cast<size_t>(p.localRank) * cpus.size() / g] : gpus[p.localRank];
    ct.ranks.push_back(p);
  }
  return ct;
}

topo::CommTopology hostsFromHashes(const std::vector<uint64_t>& hostHashOfRank) {
  topo::CommTopology ct;
  std::map<uint64_t, int> hostIndex;
  std::vector<int> filled;
  for (size_t r = 0; r < hostHashOfRank.size(); ++r) {
    auto [it, fresh] = hostIndex.emplace(hostHashOfRank[r], static_cast<int>(ct.hosts.size()));
    const int h = it->second;
    if (fresh) {
      filled.push_back(0);
      ct.hostHashes.push_back(hostHashOfRank[r]);
      Topology t;
      t.hostName = "host" + std::to_string(h);
      addCpu(t, 0);
      ct.hosts.push_back(std::move(t));
    }
    topo::RankPlace p;
    p.host = h;
    p.device = 0;
    p.localRank = filled[h]++;
    ct.ranks.push_back(p);
  }
  return ct;
}

bool parseSyntheticSpec(const std::string& text, SyntheticSpec* out, std::string* error) {
  SyntheticSpec s;
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    *error = "expected SHAPE:HOSTSxGPUS, e.g. nvswitch:4x8";
    return false;
  }
  const std::string shape = text.substr(0, colon);
  bool known = false;
  for (SyntheticShape c : {SyntheticShape::NvSwitch, SyntheticShape::Pcie, SyntheticShape::Pairwise,
                           SyntheticShape::Mesh, SyntheticShape::Host})
    if (shape == syntheticShapeName(c)) s.shape = c, known = true;
  if (!known) {
    *error = "unknown shape '" + shape + "' (nvswitch, pcie, pairwise, mesh, host)";
    return false;
  }
  std::string rest = text.substr(colon + 1);
  std::string dims = rest.substr(0, rest.find(','));
  int hosts = 0, per = 0;
  char extra = 0;
  if (std::sscanf(dims.c_str(), "%dx%d%c", &hosts, &per, &extra) != 2 || hosts < 1 || per < 1 || hosts > 65536 ||
      per > 1024) {
    *error = "bad size '" + dims + "': expected HOSTSxGPUS with positive numbers";
    return false;
  }
  s.hosts = hosts;
  s.perHost = per;
  size_t pos = rest.find(',');
  while (pos != std::string::npos) {
    size_t next = rest.find(',', pos + 1);
    std::string opt = rest.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    if (opt == "rr")
      s.roundRobin = true;
    else if (opt.rfind("nics=", 0) == 0)
      s.nics = std::atoi(opt.c_str() + 5);
    else if (opt.rfind("nvlinks=", 0) == 0)
      s.nvlinks = std::atoi(opt.c_str() + 8);
    else {
      *error = "unknown option '" + opt + "' (nics=N, nvlinks=N, rr)";
      return false;
    }
    pos = next;
  }
  *out = s;
  return true;
}

}  // namespace chorus::graph
