// Topology graph operations and path computation.
//
// Paths are the widest (largest bottleneck bandwidth) route between two
// nodes, ties broken by fewer hops, except that a direct NVLink/C2C link
// between the two always wins (see directFabricLink); found with a Dijkstra-style search per
// source: extending a path never widens it or shortens it, so the first time a
// node is settled its label is final. Routing rules keep the search physical:
// a NIC is never crossed, and a GPU is crossed only from NVLink to NVLink
// (NVB); PCI traffic does not flow through a GPU. Because a GPU reached over
// PCI may still have to relay NVLink traffic, GPUs carry two labels (arrived
// over NVLink or not). The cost is O(V^2) per source, about 30 us for an
// 8-GPU, 8-NIC box, which is fine at every communicator init.
#include "topo/topology.h"

#include <strings.h>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <deque>

namespace chorus::topo {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::Gpu:
      return "GPU";
    case NodeType::Cpu:
      return "CPU";
    case NodeType::PciSwitch:
      return "PCI";
    case NodeType::Nic:
      return "NIC";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::NvLink:
      return "NVLink";
    case LinkType::C2C:
      return "C2C";
    case LinkType::Pci:
      return "PCI";
    case LinkType::Smp:
      return "SMP";
    case LinkType::Net:
      return "NET";
  }
  return "?";
}

namespace {
constexpr const char* kPathNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS"};
constexpr int kPathCount = sizeof(kPathNames) / sizeof(kPathNames[0]);
}  // namespace

const char* pathTypeName(PathType t) {
  int i = static_cast<int>(t);
  return i >= 0 && i < kPathCount ? kPathNames[i] : "?";
}

bool parsePathType(const std::string& s, PathType* out) {
  for (int i = 0; i < kPathCount; ++i) {
    if (strcasecmp(s.c_str(), kPathNames[i]) == 0) {
      *out = static_cast<PathType>(i);
      return true;
    }
  }
  if (s.empty() || s.size() > 3) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  int v = std::atoi(s.c_str());
  if (v >= kPathCount) return false;
  *out = static_cast<PathType>(v);
  return true;
}

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  int used = 0;
  const char* s = busId.c_str();
  if (std::sscanf(s, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) == 4 && s[used] == '\0') {
    // domain present
  } else if (std::sscanf(s, "%x:%x.%x%n", &bus, &dev, &fn, &used) == 3 && s[used] == '\0') {
    domain = 0;
  } else {
    return "";
  }
  if (domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, dev, fn);
  return buf;
}

int Topology::addNode(Node n) {
  int sameType = 0;
  for (const Node& m : nodes)
    if (m.type == n.type) ++sameType;
  n.index = sameType;
  nodes.push_back(std::move(n));
  paths.clear();
  return static_cast<int>(nodes.size()) - 1;
}

void Topology::addLink(int a, int b, LinkType type, double bwGBs, int count) {
  links.push_back(Link{a, b, type, bwGBs, count, false});
  links.push_back(Link{b, a, type, bwGBs, count, false});
  paths.clear();
}

std::vector<int> Topology::nodesOfType(NodeType t) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    if (nodes[i].type == t) out.push_back(i);
  std::sort(out.begin(), out.end(), [&](int a, int b) { return nodes[a].index < nodes[b].index; });
  return out;
}

int Topology::findGpu(int cudaDev) const {
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    if (nodes[i].type == NodeType::Gpu && nodes[i].cudaDev == cudaDev) return i;
  return -1;
}

int Topology::findByBusId(const std::string& busId) const {
  std::string want = normalizeBusId(busId);
  if (want.empty()) return -1;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    if (!nodes[i].busId.empty() && normalizeBusId(nodes[i].busId) == want) return i;
  return -1;
}

int Topology::findLink(int from, int to) const {
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    if (links[i].from == from && links[i].to == to) return i;
  return -1;
}

// Breadth-first up the PCI/C2C tree (through switches only) to the nearest
// CPU; falls back to the CPU whose NUMA id the node names.
int Topology::cpuOf(int node) const {
  if (node < 0 || node >= static_cast<int>(nodes.size())) return -1;
  if (nodes[node].type == NodeType::Cpu) return node;
  std::vector<bool> seen(nodes.size(), false);
  std::deque<int> queue{node};
  seen[node] = true;
  while (!queue.empty()) {
    int cur = queue.front();
    queue.pop_front();
    for (const Link& l : links) {
      if (l.from != cur || seen[l.to] || (l.type != LinkType::Pci && l.type != LinkType::C2C)) continue;
      const Node& next = nodes[l.to];
      if (next.type == NodeType::Cpu) return l.to;
      if (next.type != NodeType::PciSwitch) continue;
      seen[l.to] = true;
      queue.push_back(l.to);
    }
  }
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    if (nodes[i].type == NodeType::Cpu && nodes[i].numa == nodes[node].numa) return i;
  return -1;
}

namespace {

struct Label {
  double bw = -1;  // < 0: unreached
  int hops = 0;
  int prevState = -1;
  bool settled = false;
};

bool better(double bw, int hops, const Label& than) {
  if (than.bw < 0) return true;
  if (bw != than.bw) return bw > than.bw;
  return hops < than.hops;
}

// Classifies a hop sequence by the links it uses and the nodes it crosses.
PathType classify(const Topology& t, const std::vector<int>& hops, const std::vector<int>& hopLinks) {
  if (hops.size() == 1) return PathType::LOC;
  bool allNvLink = true, anySmp = false, anyNet = false, anyC2C = false, crossesCpu = false;
  int switches = 0;
  for (int li : hopLinks) {
    LinkType lt = t.links[li].type;
    allNvLink = allNvLink && lt == LinkType::NvLink;
    anySmp = anySmp || lt == LinkType::Smp;
    anyNet = anyNet || lt == LinkType::Net;
    anyC2C = anyC2C || lt == LinkType::C2C;
  }
  for (size_t i = 1; i + 1 < hops.size(); ++i) {
    NodeType nt = t.nodes[hops[i]].type;
    if (nt == NodeType::PciSwitch) ++switches;
    if (nt == NodeType::Cpu) crossesCpu = true;
  }
  if (anyNet) return PathType::NET;
  if (anySmp) return PathType::SYS;
  if (allNvLink) {
    if (hops.size() == 2) return PathType::NVL;
    bool viaGpus = true;
    for (size_t i = 1; i + 1 < hops.size(); ++i) viaGpus = viaGpus && t.nodes[hops[i]].type == NodeType::Gpu;
    return viaGpus ? PathType::NVB : PathType::PHB;  // NVLink through a CPU (POWER-style)
  }
  bool endsAtCpu = t.nodes[hops.front()].type == NodeType::Cpu || t.nodes[hops.back()].type == NodeType::Cpu;
  if (anyC2C && hops.size() == 2) return PathType::C2C;
  if (crossesCpu || endsAtCpu) return PathType::PHB;
  return switches > 1 ? PathType::PXB : PathType::PIX;
}

// The widest direct NVLink or C2C link from the source to `dst`, or -1. Such
// a link is dedicated to the pair, so it is the path even when a route over
// PCI has a wider nominal bottleneck: that route shares its switch uplinks and
// host bridge with everything else (NCCL likewise prefers the direct link).
int directFabricLink(const Topology& t, const std::vector<int>& outLinks, int dst) {
  int best = -1;
  for (int li : outLinks) {
    const Link& l = t.links[li];
    if (l.to != dst || (l.type != LinkType::NvLink && l.type != LinkType::C2C)) continue;
    if (best < 0 || l.bwGBs > t.links[best].bwGBs) best = li;
  }
  return best;
}

}  // namespace

void Topology::computePaths() {
  const int n = static_cast<int>(nodes.size());
  std::vector<std::vector<int>> out(n);  // outgoing link indices per node
  for (int i = 0; i < static_cast<int>(links.size()); ++i)
    if (links[i].from >= 0 && links[i].from < n && links[i].to >= 0 && links[i].to < n) out[links[i].from].push_back(i);
  paths.assign(n, std::vector<Path>(n));
  // State s = node * 2 + (arrived over NVLink); prevLink[s] is the link taken into s.
  std::vector<Label> label(2 * n);
  std::vector<int> prevLink(2 * n);
  for (int src = 0; src < n; ++src) {
    std::fill(label.begin(), label.end(), Label{});
    label[2 * src] = Label{1e30, 0, -1, false};
    for (;;) {
      int cur = -1;
      for (int s = 0; s < 2 * n; ++s)
        if (!label[s].settled && label[s].bw >= 0 && (cur < 0 || better(label[s].bw, label[s].hops, label[cur])))
          cur = s;
      if (cur < 0) break;
      label[cur].settled = true;
      const int node = cur / 2;
      const bool viaNvl = cur % 2 == 1;
      const NodeType nt = nodes[node].type;
      if (node != src && nt == NodeType::Nic) continue;  // NICs are leaves
      for (int li : out[node]) {
        const Link& l = links[li];
        bool nvl = l.type == LinkType::NvLink;
        if (node != src && nt == NodeType::Gpu && !(viaNvl && nvl)) continue;  // GPUs relay NVLink only
        int next = 2 * l.to + (nvl ? 1 : 0);
        double bw = std::min(label[cur].bw, l.bwGBs);
        if (label[next].settled || !better(bw, label[cur].hops + 1, label[next])) continue;
        label[next] = Label{bw, label[cur].hops + 1, cur, false};
        prevLink[next] = li;
      }
    }
    for (int dst = 0; dst < n; ++dst) {
      Path& p = paths[src][dst];
      if (dst == src) {
        p = Path{PathType::LOC, bw::kLocal, {src}};
        continue;
      }
      int direct = directFabricLink(*this, out[src], dst);
      if (direct >= 0) {
        p = Path{PathType::DIS, links[direct].bwGBs, {src, dst}};
        p.type = classify(*this, p.hops, {direct});
        continue;
      }
      int best = 2 * dst;
      if (better(label[2 * dst + 1].bw, label[2 * dst + 1].hops, label[best])) best = 2 * dst + 1;
      if (label[best].bw < 0) continue;  // DIS
      std::vector<int> hops, hopLinks;
      for (int s = best; s >= 0; s = label[s].prevState) {
        hops.push_back(s / 2);
        if (label[s].prevState >= 0) hopLinks.push_back(prevLink[s]);
      }
      std::reverse(hops.begin(), hops.end());
      std::reverse(hopLinks.begin(), hopLinks.end());
      p.bwGBs = label[best].bw;
      p.type = classify(*this, hops, hopLinks);
      p.hops = std::move(hops);
    }
  }
}

}  // namespace chorus::topo
