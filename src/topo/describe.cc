// Text rendering of a Topology. The tree follows each node's PCI parent (the
// neighbour one step closer to a CPU, found breadth-first from the CPUs);
// nodes no CPU reaches over PCI are listed at the end.
#include "topo/describe.h"

#include <cstdarg>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

namespace chorus::topo {

namespace {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

std::vector<int> pciParents(const Topology& t, std::vector<double>* parentBw) {
  std::vector<int> parent(t.nodes.size(), -1);
  parentBw->assign(t.nodes.size(), 0);
  std::vector<bool> seen(t.nodes.size(), false);
  std::deque<int> queue;
  for (int c : t.nodesOfType(NodeType::Cpu)) {
    queue.push_back(c);
    seen[c] = true;
  }
  while (!queue.empty()) {
    int cur = queue.front();
    queue.pop_front();
    for (const Link& l : t.links) {
      if (l.from != cur || l.type != LinkType::Pci || seen[l.to]) continue;
      seen[l.to] = true;
      parent[l.to] = cur;
      (*parentBw)[l.to] = l.bwGBs;
      if (t.nodes[l.to].type == NodeType::PciSwitch) queue.push_back(l.to);
    }
  }
  return parent;
}

std::string nodeDetails(const Node& n) {
  switch (n.type) {
    case NodeType::Cpu:
      return format(" numa %d, %d cores%s%s%s%s", n.numa, n.cores, n.arch.empty() ? "" : ", ", n.arch.c_str(),
                    n.vendor.empty() ? "" : " ", n.vendor.c_str());
    case NodeType::Gpu:
      return format(" %s dev %d sm %d%s%s", n.busId.c_str(), n.cudaDev, n.smVersion, n.gdr ? " gdr" : "",
                    n.rank >= 0 ? format(" rank %d", n.rank).c_str() : "");
    case NodeType::Nic:
      return format(" %s port %d, %.1f Gb/s%s%s", n.busId.empty() ? "(no PCI device)" : n.busId.c_str(), n.port,
                    n.speedGBs * 8, n.rdma ? ", RDMA" : ", socket", n.gdr ? ", GDR" : "");
    case NodeType::PciSwitch:
      return "";
  }
  return "";
}

// NVLink and C2C links out of `node`, one line each.
void sideLinks(const Topology& t, int node, const std::string& indent, std::string* out) {
  int fabricPeers = 0;
  for (const Link& l : t.links) {
    if (l.from != node || (l.type != LinkType::NvLink && l.type != LinkType::C2C)) continue;
    if (l.viaNvSwitch) {
      ++fabricPeers;
      continue;
    }
    *out += format("%s%s x%d -> %s, %.1f GB/s\n", indent.c_str(), linkTypeName(l.type), l.count,
                   describeNode(t, l.to).c_str(), l.bwGBs);
  }
  if (t.nodes[node].nvSwitchLinks > 0)
    *out += format("%sNVLink x%d -> NVSwitch fabric (%d GPU peers)\n", indent.c_str(), t.nodes[node].nvSwitchLinks,
                   fabricPeers);
}

void tree(const Topology& t, int node, const std::vector<int>& parent, const std::vector<double>& bw, int depth,
          std::string* out) {
  std::string indent(2 * depth, ' ');
  const Node& n = t.nodes[node];
  if (n.type == NodeType::Cpu)
    *out += format("%s%s%s\n", indent.c_str(), describeNode(t, node).c_str(), nodeDetails(n).c_str());
  else
    *out += format("%s+- PCI %.1f GB/s - %s%s\n", indent.c_str(), bw[node], describeNode(t, node).c_str(),
                   nodeDetails(n).c_str());
  sideLinks(t, node, indent + "     ", out);
  for (int i = 0; i < static_cast<int>(t.nodes.size()); ++i)
    if (parent[i] == node) tree(t, i, parent, bw, depth + 1, out);
}

void matrix(const Topology& t, const std::vector<int>& rows, const std::vector<int>& cols, const char* title,
            std::string* out) {
  if (rows.empty() || cols.empty()) return;
  *out += format("\n%s\n%-8s", title, "");
  for (int c : cols) *out += format("%-8s", format("%s%d", nodeTypeName(t.nodes[c].type), t.nodes[c].index).c_str());
  *out += "\n";
  for (int r : rows) {
    *out += format("%-8s", format("%s%d", nodeTypeName(t.nodes[r].type), t.nodes[r].index).c_str());
    for (int c : cols) {
      const Path& p = t.path(r, c);
      *out += format("%-8s", r == c ? "X" : format("%s/%.0f", pathTypeName(p.type), p.bwGBs).c_str());
    }
    *out += "\n";
  }
}

}  // namespace

std::string describeNode(const Topology& t, int node) {
  const Node& n = t.nodes[node];
  switch (n.type) {
    case NodeType::Gpu:
      return format("GPU %d", n.index);
    case NodeType::Cpu:
      return format("CPU %d", n.index);
    case NodeType::Nic:
      return n.name.empty() ? format("NIC %d", n.index) : format("NIC %d (%s)", n.index, n.name.c_str());
    case NodeType::PciSwitch:
      return format("PCI switch %s", n.busId.c_str());
  }
  return "?";
}

std::string describeTopology(const Topology& t) {
  std::string out = format("Topology of %s: %zu CPUs, %zu GPUs, %zu NICs, %zu PCI switches\n",
                           t.hostName.empty() ? "(unnamed host)" : t.hostName.c_str(),
                           t.nodesOfType(NodeType::Cpu).size(), t.nodesOfType(NodeType::Gpu).size(),
                           t.nodesOfType(NodeType::Nic).size(), t.nodesOfType(NodeType::PciSwitch).size());
  std::vector<double> bw;
  std::vector<int> parent = pciParents(t, &bw);
  std::vector<int> cpus = t.nodesOfType(NodeType::Cpu);
  for (size_t i = 0; i < cpus.size(); ++i) {
    tree(t, cpus[i], parent, bw, 0, &out);
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      int l = t.findLink(cpus[i], cpus[j]);
      if (l >= 0)
        out += format("  %s <-> %s: %s %.1f GB/s\n", describeNode(t, cpus[i]).c_str(), describeNode(t, cpus[j]).c_str(),
                      linkTypeName(t.links[l].type), t.links[l].bwGBs);
    }
  }
  for (int i = 0; i < static_cast<int>(t.nodes.size()); ++i) {
    if (parent[i] < 0 && t.nodes[i].type != NodeType::Cpu)
      out += format("(no PCI path to a CPU) %s%s\n", describeNode(t, i).c_str(), nodeDetails(t.nodes[i]).c_str());
  }
  if (t.paths.size() != t.nodes.size()) return out;
  std::vector<int> gpus = t.nodesOfType(NodeType::Gpu);
  std::vector<int> nics = t.nodesOfType(NodeType::Nic);
  matrix(t, gpus, gpus, "GPU x GPU paths (type/GB/s):", &out);
  matrix(t, gpus, nics, "GPU x NIC paths (type/GB/s):", &out);
  if (gpus.empty()) matrix(t, cpus, nics, "CPU x NIC paths (type/GB/s):", &out);
  return out;
}

}  // namespace chorus::topo
