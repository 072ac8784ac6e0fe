// XML -> Topology. The element tree is walked once to create nodes and the
// PCI links to each node's parent; NVLinks, C2C links and the CPU
// interconnect are added afterwards, when every bus id is known.
#include "topo/xml_read.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/result.h"
#include "topo/topology_build.h"
#include "topo/xml.h"

namespace chorus::topo {

double pciLinkBwGBs(const std::string& speed, int width, double fallback) {
  char* end = nullptr;
  double gts = std::strtod(speed.c_str(), &end);
  if (end == speed.c_str() || !(gts > 0) || width <= 0) return fallback;
  // Usable bandwidth: GT/s x lanes / 8 bits, derated to 75% for encoding and
  // protocol overhead (Gen4 x16 -> 24 GB/s, as in topo/topology.h bw::).
  return gts * width * 3.0 / 32.0;
}

namespace {

constexpr double kDefaultPciBw = bw::kPciGen4x16;

struct PendingNvLink {
  int gpu;
  std::string target;
  int count;
  unsigned tclass;
  int line;
};

struct PendingC2C {
  int gpu;
  int count;
  double bwPerLink;
};

class Loader {
 public:
  Loader(const std::string& source, Topology* topo) : source_(source), topo_(*topo) {}

  ncclResult_t load(const XmlElement& root) {
    if (root.name != "system") return bad(root, "the root element must be <system>");
    const std::string* version = root.attr("version");
    if (version == nullptr) return bad(root, "<system> has no version attribute");
    if (*version != "1")
      return bad(root, "unsupported topology version \"%s\" (this reader knows version 1)", version->c_str());
    if (const std::string* host = root.attr("host")) topo_.hostName = *host;
    for (const XmlElement& c : root.children)
      if (c.name == "cpu") CHORUS_CHECK(cpu(c));
    if (topo_.nodesOfType(NodeType::Cpu).empty()) return bad(root, "<system> has no <cpu>");
    CHORUS_CHECK(resolveNvLinks());
    resolveC2C();
    linkCpuSockets(&topo_);
    topo_.computePaths();
    return ncclSuccess;
  }

 private:
  ncclResult_t bad(const XmlElement& el, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return fail(ncclInvalidUsage, "%s:%d: bad topology XML: %s", source_.c_str(), el.line, what);
  }

  // Integer attribute (decimal or 0x hex); `def` when absent, error when present but not a number.
  ncclResult_t intAttr(const XmlElement& el, const char* key, long long def, long long* out) {
    const std::string* v = el.attr(key);
    if (v == nullptr || v->empty()) {
      *out = def;
      return ncclSuccess;
    }
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v->c_str(), &end, 0);
    if (errno != 0 || *end != '\0')
      return bad(el, "<%s %s=\"%s\"> is not an integer", el.name.c_str(), key, v->c_str());
    *out = x;
    return ncclSuccess;
  }

  ncclResult_t intAttr(const XmlElement& el, const char* key, int def, int* out) {
    long long x = 0;
    CHORUS_CHECK(intAttr(el, key, static_cast<long long>(def), &x));
    if (x < -2147483647LL || x > 2147483647LL) return bad(el, "<%s %s> is out of range", el.name.c_str(), key);
    *out = static_cast<int>(x);
    return ncclSuccess;
  }

  ncclResult_t doubleAttr(const XmlElement& el, const char* key, double def, double* out) {
    const std::string* v = el.attr(key);
    if (v == nullptr || v->empty()) {
      *out = def;
      return ncclSuccess;
    }
    char* end = nullptr;
    double x = std::strtod(v->c_str(), &end);
    if (*end != '\0' || !std::isfinite(x) || x < 0)
      return bad(el, "<%s %s=\"%s\"> is not a non-negative number", el.name.c_str(), key, v->c_str());
    *out = x;
    return ncclSuccess;
  }

  ncclResult_t guidAttr(const XmlElement& el, uint64_t* out) {
    const std::string* v = el.attr("guid");
    *out = 0;
    if (v == nullptr || v->empty()) return ncclSuccess;
    char* end = nullptr;
    errno = 0;
    unsigned long long x = std::strtoull(v->c_str(), &end, 0);
    if (errno != 0 || *end != '\0') return bad(el, "<net guid=\"%s\"> is not a number", v->c_str());
    *out = x;
    return ncclSuccess;
  }

  static std::string attrOr(const XmlElement& el, const char* key, const char* def = "") {
    const std::string* v = el.attr(key);
    return v != nullptr ? *v : def;
  }

  ncclResult_t cpu(const XmlElement& el) {
    Node n;
    n.type = NodeType::Cpu;
    CHORUS_CHECK(intAttr(el, "numaid", -1, &n.numa));
    if (n.numa < 0) return bad(el, "<cpu> needs a numaid >= 0");
    for (int c : topo_.nodesOfType(NodeType::Cpu))
      if (topo_.nodes[c].numa == n.numa) return bad(el, "two <cpu> elements with numaid %d", n.numa);
    n.affinity = attrOr(el, "affinity");
    n.arch = attrOr(el, "arch");
    n.vendor = attrOr(el, "vendor");
    CHORUS_CHECK(intAttr(el, "familyid", 0, &n.familyId));
    CHORUS_CHECK(intAttr(el, "modelid", 0, &n.modelId));
    CHORUS_CHECK(intAttr(el, "cores", countMaskBits(n.affinity), &n.cores));
    int self = topo_.addNode(n);
    for (const XmlElement& c : el.children) {
      if (c.name == "pci") CHORUS_CHECK(pci(c, self, n.numa));
      if (c.name == "nic") CHORUS_CHECK(nic(c, self, n.numa, "", 0));
    }
    return ncclSuccess;
  }

  ncclResult_t pci(const XmlElement& el, int parent, int numa) {
    const std::string* rawBus = el.attr("busid");
    if (rawBus == nullptr) return bad(el, "<pci> has no busid");
    std::string busId = normalizeBusId(*rawBus);
    if (busId.empty()) return bad(el, "<pci busid=\"%s\"> is not a PCI bus id", rawBus->c_str());
    int width = 0;
    CHORUS_CHECK(intAttr(el, "link_width", 16, &width));
    double linkBw = pciLinkBwGBs(attrOr(el, "link_speed"), width, kDefaultPciBw);
    bool hasPci = false;
    for (const XmlElement& c : el.children) hasPci = hasPci || c.name == "pci";
    for (const XmlElement& c : el.children) {
      if (c.name == "gpu") return gpu(c, busId, parent, numa, linkBw);
      if (c.name == "nic" && !hasPci) return nic(c, parent, numa, busId, linkBw);
    }
    if (!hasPci) return ncclSuccess;  // a device we do not model
    Node sw;
    sw.type = NodeType::PciSwitch;
    sw.busId = busId;
    sw.numa = numa;
    int self = topo_.addNode(sw);
    topo_.addLink(self, parent, LinkType::Pci, linkBw);
    for (const XmlElement& c : el.children)
      if (c.name == "pci") CHORUS_CHECK(pci(c, self, numa));
    return ncclSuccess;
  }

  ncclResult_t gpu(const XmlElement& el, const std::string& busId, int parent, int numa, double linkBw) {
    Node n;
    n.type = NodeType::Gpu;
    n.busId = busId;
    n.numa = numa;
    int gdr = 0;
    CHORUS_CHECK(intAttr(el, "dev", -1, &n.cudaDev));
    CHORUS_CHECK(intAttr(el, "sm", 0, &n.smVersion));
    CHORUS_CHECK(intAttr(el, "rank", -1, &n.rank));
    CHORUS_CHECK(intAttr(el, "gdr", 0, &gdr));
    n.gdr = gdr != 0;
    if (n.cudaDev < 0) return bad(el, "<gpu> needs dev >= 0");
    if (topo_.findGpu(n.cudaDev) >= 0) return bad(el, "two GPUs with dev %d", n.cudaDev);
    int self = topo_.addNode(n);
    topo_.addLink(self, parent, LinkType::Pci, linkBw);
    for (const XmlElement& c : el.children) {
      if (c.name == "nvlink") {
        PendingNvLink l{self, attrOr(c, "target"), 0, 0, c.line};
        long long tclass = 0;
        CHORUS_CHECK(intAttr(c, "count", 1, &l.count));
        CHORUS_CHECK(intAttr(c, "tclass", 0, &tclass));
        if (l.count <= 0) return bad(c, "<nvlink count> must be positive");
        l.tclass = static_cast<unsigned>(tclass);
        nvlinks_.push_back(std::move(l));
      } else if (c.name == "c2c") {
        PendingC2C l{self, 0, 0};
        CHORUS_CHECK(intAttr(c, "count", 1, &l.count));
        CHORUS_CHECK(doubleAttr(c, "bw", bw::kC2C, &l.bwPerLink));
        c2c_.push_back(l);
      }
    }
    return ncclSuccess;
  }

  ncclResult_t nic(const XmlElement& el, int parent, int numa, const std::string& busId, double linkBw) {
    for (const XmlElement& c : el.children) {
      if (c.name != "net") continue;
      Node n;
      n.type = NodeType::Nic;
      n.busId = busId;
      n.numa = numa;
      n.name = attrOr(c, "name");
      double mbps = 0;
      int gdr = 0, rdma = -1;
      CHORUS_CHECK(doubleAttr(c, "speed", 0, &mbps));
      CHORUS_CHECK(intAttr(c, "port", 1, &n.port));
      CHORUS_CHECK(intAttr(c, "gdr", 0, &gdr));
      CHORUS_CHECK(intAttr(c, "rdma", -1, &rdma));
      CHORUS_CHECK(guidAttr(c, &n.guid));
      n.speedGBs = mbps / 8000.0;
      n.gdr = gdr != 0;
      n.rdma = rdma >= 0 ? rdma != 0 : n.guid != 0;  // NCCL's files: IB/RoCE devices carry a GUID
      int self = topo_.addNode(n);
      // A NIC without a PCI parent (virtual, or a socket NIC under <cpu>) hangs off the CPU.
      topo_.addLink(self, parent, LinkType::Pci, busId.empty() ? std::max(n.speedGBs, kDefaultPciBw) : linkBw);
    }
    return ncclSuccess;
  }

  ncclResult_t resolveNvLinks() {
    std::map<std::pair<int, int>, int> direct;  // (gpuA < gpuB) -> lanes
    for (const PendingNvLink& l : nvlinks_) {
      if (l.tclass == kPciClassNvSwitch) {
        topo_.nodes[l.gpu].nvSwitchLinks += l.count;
        continue;
      }
      int peer = topo_.findByBusId(l.target);
      if (l.tclass == kPciClassHostBridge || (peer >= 0 && topo_.nodes[peer].type == NodeType::Cpu)) {
        int cpu = topo_.cpuOf(l.gpu);
        if (cpu >= 0) addNvLinks(&topo_, l.gpu, cpu, l.count);
        continue;
      }
      if (peer < 0 || topo_.nodes[peer].type != NodeType::Gpu || peer == l.gpu) {
        CHORUS_INFO(kLogGraph, "%s:%d: NVLink target %s is not a GPU of this file; ignored", source_.c_str(), l.line,
                    l.target.c_str());
        continue;
      }
      auto key = std::make_pair(std::min(l.gpu, peer), std::max(l.gpu, peer));
      direct[key] = std::max(direct[key], l.count);  // both ends usually list the same link
    }
    for (const auto& [pair, lanes] : direct) addNvLinks(&topo_, pair.first, pair.second, lanes);
    connectNvSwitchFabric(&topo_);
    return ncclSuccess;
  }

  void resolveC2C() {
    for (const PendingC2C& l : c2c_) {
      int cpu = topo_.cpuOf(l.gpu);
      if (cpu >= 0 && l.count > 0) topo_.addLink(l.gpu, cpu, LinkType::C2C, l.count * l.bwPerLink, l.count);
    }
  }

  const std::string& source_;
  Topology& topo_;
  std::vector<PendingNvLink> nvlinks_;
  std::vector<PendingC2C> c2c_;
};

}  // namespace

ncclResult_t parseTopologyXml(const std::string& text, const std::string& source, Topology* out) {
  XmlElement root;
  CHORUS_CHECK(parseXml(text, source, &root));
  Topology topo;
  Loader loader(source, &topo);
  CHORUS_CHECK(loader.load(root));
  *out = std::move(topo);
  return ncclSuccess;
}

ncclResult_t loadTopologyXml(const std::string& path, Topology* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(ncclInvalidUsage, "cannot open topology file %s: %s", path.c_str(), strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail(ncclInvalidUsage, "cannot read topology file %s", path.c_str());
  CHORUS_CHECK(parseTopologyXml(text.str(), path, out));
  CHORUS_INFO(kLogGraph, "loaded topology %s: %zu GPUs, %zu NICs, %zu CPUs", path.c_str(),
              out->nodesOfType(NodeType::Gpu).size(), out->nodesOfType(NodeType::Nic).size(),
              out->nodesOfType(NodeType::Cpu).size());
  return ncclSuccess;
}

}  // namespace chorus::topo
