// Topology -> XML. The PCI tree is recovered from the links: a node's parent
// is its neighbour (over a PCI link) on the way up to a CPU, found by a
// breadth-first walk down from every CPU through switches.
#include "topo/xml_write.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>

#include "core/result.h"
#include "topo/topology_build.h"
#include "topo/xml.h"
#include "topo/xml_read.h"

namespace chorus::topo {

void pciLinkFromBw(double bwGBs, std::string* speed, int* width) {
  *width = 16;
  double gts = bwGBs * 32.0 / (3.0 * 16);  // inverse of pciLinkBwGBs
  char buf[64];
  if (std::fabs(gts * 10 - std::round(gts * 10)) < 1e-9)
    std::snprintf(buf, sizeof(buf), "%.1f GT/s PCIe", gts);
  else
    std::snprintf(buf, sizeof(buf), "%.17g GT/s PCIe", gts);
  *speed = buf;
}

namespace {

// Synthetic bus id written as the target of NVSwitch links (only tclass matters on reading).
constexpr const char* kNvSwitchTarget = "ffff:ff:1f.7";

std::string hex(unsigned long long v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", v);
  return buf;
}

std::string hexClass(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%06x", v);
  return buf;
}

std::string num(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

class Writer {
 public:
  explicit Writer(const Topology& t) : t_(t), parent_(t.nodes.size(), -1), parentBw_(t.nodes.size(), 0) {}

  XmlElement build() {
    findParents();
    XmlElement sys;
    sys.name = "system";
    sys.set("version", "1");
    if (!t_.hostName.empty()) sys.set("host", t_.hostName);
    for (int c : t_.nodesOfType(NodeType::Cpu)) sys.children.push_back(cpu(c));
    return sys;
  }

 private:
  void findParents() {
    std::deque<int> queue;
    for (int c : t_.nodesOfType(NodeType::Cpu)) queue.push_back(c);
    std::vector<bool> seen(t_.nodes.size(), false);
    for (int c : queue) seen[c] = true;
    while (!queue.empty()) {
      int cur = queue.front();
      queue.pop_front();
      for (const Link& l : t_.links) {
        if (l.from != cur || l.type != LinkType::Pci || seen[l.to]) continue;
        if (t_.nodes[l.to].type == NodeType::Cpu) continue;
        seen[l.to] = true;
        parent_[l.to] = cur;
        parentBw_[l.to] = l.bwGBs;
        if (t_.nodes[l.to].type == NodeType::PciSwitch) queue.push_back(l.to);
      }
    }
    // Nodes with no PCI path to a CPU are written under the CPU of their NUMA node.
    std::vector<int> cpus = t_.nodesOfType(NodeType::Cpu);
    for (int i = 0; i < static_cast<int>(t_.nodes.size()); ++i) {
      if (seen[i] || cpus.empty()) continue;
      parent_[i] = cpus.front();
      for (int c : cpus)
        if (t_.nodes[c].numa == t_.nodes[i].numa) parent_[i] = c;
      parentBw_[i] = bw::kPciGen4x16;
    }
  }

  std::vector<int> childrenOf(int p) const {
    std::vector<int> out;
    for (int i = 0; i < static_cast<int>(t_.nodes.size()); ++i)
      if (parent_[i] == p) out.push_back(i);
    return out;
  }

  XmlElement cpu(int c) {
    const Node& n = t_.nodes[c];
    XmlElement el;
    el.name = "cpu";
    el.set("numaid", std::to_string(n.numa));
    el.set("affinity", n.affinity);
    el.set("arch", n.arch);
    el.set("vendor", n.vendor);
    el.set("familyid", std::to_string(n.familyId));
    el.set("modelid", std::to_string(n.modelId));
    if (n.cores != countMaskBits(n.affinity)) el.set("cores", std::to_string(n.cores));
    appendChildren(c, &el);
    return el;
  }

  // Children of `p`; NICs sharing a bus id become one <pci><nic> with several <net>.
  void appendChildren(int p, XmlElement* el) {
    std::vector<int> kids = childrenOf(p);
    std::vector<bool> done(t_.nodes.size(), false);
    for (int k : kids) {
      if (done[k]) continue;
      const Node& n = t_.nodes[k];
      if (n.type == NodeType::Nic) {
        XmlElement nic;
        nic.name = "nic";
        for (int o : kids) {
          if (t_.nodes[o].type == NodeType::Nic && t_.nodes[o].busId == n.busId) {
            nic.children.push_back(net(o));
            done[o] = true;
          }
        }
        if (n.busId.empty()) {
          el->children.push_back(std::move(nic));
        } else {
          XmlElement wrap = pciFor(k, n.rdma ? 0x020700 : 0x020000);
          wrap.children.push_back(std::move(nic));
          el->children.push_back(std::move(wrap));
        }
      } else if (n.type == NodeType::Gpu) {
        XmlElement wrap = pciFor(k, kPciClassGpu);
        wrap.set("vendor", "0x10de");
        wrap.children.push_back(gpu(k));
        el->children.push_back(std::move(wrap));
      } else if (n.type == NodeType::PciSwitch) {
        XmlElement sw = pciFor(k, 0x060400);
        appendChildren(k, &sw);
        el->children.push_back(std::move(sw));
      }
    }
  }

  XmlElement pciFor(int k, unsigned pciClass) {
    XmlElement el;
    el.name = "pci";
    el.set("busid", t_.nodes[k].busId);
    el.set("class", hexClass(pciClass));
    std::string speed;
    int width = 0;
    pciLinkFromBw(parentBw_[k], &speed, &width);
    el.set("link_speed", speed);
    el.set("link_width", std::to_string(width));
    return el;
  }

  XmlElement gpu(int g) {
    const Node& n = t_.nodes[g];
    XmlElement el;
    el.name = "gpu";
    el.set("dev", std::to_string(n.cudaDev));
    el.set("sm", std::to_string(n.smVersion));
    el.set("rank", std::to_string(n.rank));
    el.set("gdr", n.gdr ? "1" : "0");
    for (const Link& l : t_.links) {
      if (l.from != g) continue;
      const Node& peer = t_.nodes[l.to];
      if (l.type == LinkType::NvLink && !l.viaNvSwitch) {
        XmlElement nv;
        nv.name = "nvlink";
        bool toCpu = peer.type == NodeType::Cpu;
        nv.set("target", toCpu ? std::string("0000:00:00.0") : peer.busId);
        nv.set("count", std::to_string(l.count));
        nv.set("tclass", hexClass(toCpu ? kPciClassHostBridge : kPciClassGpu));
        el.children.push_back(std::move(nv));
      } else if (l.type == LinkType::C2C) {
        XmlElement c2c;
        c2c.name = "c2c";
        c2c.set("count", std::to_string(l.count));
        c2c.set("bw", num(l.count > 0 ? l.bwGBs / l.count : l.bwGBs));
        el.children.push_back(std::move(c2c));
      }
    }
    if (n.nvSwitchLinks > 0) {
      XmlElement nv;
      nv.name = "nvlink";
      nv.set("target", kNvSwitchTarget);
      nv.set("count", std::to_string(n.nvSwitchLinks));
      nv.set("tclass", hexClass(kPciClassNvSwitch));
      el.children.push_back(std::move(nv));
    }
    return el;
  }

  XmlElement net(int k) {
    const Node& n = t_.nodes[k];
    XmlElement el;
    el.name = "net";
    el.set("name", n.name);
    el.set("dev", std::to_string(n.index));
    el.set("speed", num(n.speedGBs * 8000.0));
    el.set("port", std::to_string(n.port));
    el.set("latency", "0");
    el.set("guid", hex(n.guid));
    el.set("gdr", n.gdr ? "1" : "0");
    el.set("rdma", n.rdma ? "1" : "0");
    return el;
  }

  const Topology& t_;
  std::vector<int> parent_;
  std::vector<double> parentBw_;
};

}  // namespace

std::string topologyToXml(const Topology& topo) {
  Writer w(topo);
  return writeXml(w.build());
}

ncclResult_t dumpTopologyXml(const Topology& topo, const std::string& path) {
  std::string text = topologyToXml(topo);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail(ncclSystemError, "cannot write topology file %s: %s", path.c_str(), strerror(errno));
  out << text;
  out.flush();
  if (!out) return fail(ncclSystemError, "writing topology file %s failed", path.c_str());
  CHORUS_INFO(kLogGraph, "topology written to %s", path.c_str());
  return ncclSuccess;
}

}  // namespace chorus::topo
