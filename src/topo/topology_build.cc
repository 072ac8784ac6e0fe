#include "topo/topology_build.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace chorus::topo {

namespace {

void foldOrAdd(Topology* t, int a, int b, double bwGBs, int lanes, bool viaSwitch) {
  bool folded = false;
  for (Link& l : t->links) {
    if (l.type == LinkType::NvLink && ((l.from == a && l.to == b) || (l.from == b && l.to == a))) {
      l.bwGBs += bwGBs;
      l.count += lanes;
      folded = true;
    }
  }
  if (folded) return;
  t->addLink(a, b, LinkType::NvLink, bwGBs, lanes);
  t->links[t->links.size() - 1].viaNvSwitch = viaSwitch;
  t->links[t->links.size() - 2].viaNvSwitch = viaSwitch;
}

}  // namespace

void addNvLinks(Topology* t, int a, int b, int lanes) {
  const Node& na = t->nodes[a];
  const Node& nb = t->nodes[b];
  int sm = nb.type == NodeType::Gpu ? std::min(na.smVersion, nb.smVersion) : na.smVersion;
  foldOrAdd(t, a, b, lanes * bw::kNvLinkPerLink(sm), lanes, false);
}

void connectNvSwitchFabric(Topology* t) {
  std::vector<int> fabric;
  for (int g : t->nodesOfType(NodeType::Gpu))
    if (t->nodes[g].nvSwitchLinks > 0) fabric.push_back(g);
  for (size_t i = 0; i < fabric.size(); ++i) {
    for (size_t j = i + 1; j < fabric.size(); ++j) {
      const Node& a = t->nodes[fabric[i]];
      const Node& b = t->nodes[fabric[j]];
      double bwGBs = std::min(a.nvSwitchLinks * bw::kNvLinkPerLink(a.smVersion),
                              b.nvSwitchLinks * bw::kNvLinkPerLink(b.smVersion));
      foldOrAdd(t, fabric[i], fabric[j], bwGBs, std::min(a.nvSwitchLinks, b.nvSwitchLinks), true);
    }
  }
}

void linkCpuSockets(Topology* t) {
  std::vector<int> cpus = t->nodesOfType(NodeType::Cpu);
  for (size_t i = 0; i < cpus.size(); ++i) {
    for (size_t j = i + 1; j < cpus.size(); ++j) {
      bool amd = t->nodes[cpus[i]].vendor == "AuthenticAMD" && t->nodes[cpus[j]].vendor == "AuthenticAMD";
      t->addLink(cpus[i], cpus[j], LinkType::Smp, amd ? bw::kSmpAmd : bw::kSmpIntel);
    }
  }
}

std::vector<int> cpusInMask(const std::string& mask) {
  std::vector<int> cpus;
  int bit = 0;
  for (auto it = mask.rbegin(); it != mask.rend(); ++it) {
    char c = *it;
    if (c == ',') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) break;  // "0x" prefix or junk ends the mask
    int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10;
    for (int b = 0; b < 4; ++b)
      if (v & (1 << b)) cpus.push_back(bit + b);
    bit += 4;
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

int countMaskBits(const std::string& mask) { return static_cast<int>(cpusInMask(mask).size()); }

std::string cpuMaskString(const std::vector<int>& cpus) {
  int maxCpu = 0;
  for (int c : cpus) maxCpu = std::max(maxCpu, c);
  std::vector<uint32_t> words(maxCpu / 32 + 1, 0);
  for (int c : cpus)
    if (c >= 0) words[c / 32] |= 1u << (c % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", words[i]);
    if (!out.empty()) out += ",";
    out += buf;
  }
  return out;
}

}  // namespace chorus::topo
