#include "transports/p2p/p2p_policy.h"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <vector>

#include "core/log.h"
#include "core/params.h"
#include "topo/path_level.h"

namespace chorus::p2p {
namespace {

using topo::PathType;

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    if (next > pos) parts.push_back(path.substr(pos, next - pos));
    pos = next + 1;
  }
  // Keep only what lies below /sys/devices: the host bridge ("pci0000:00")
  // followed by the chain of PCI functions down to the device.
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& c = parts[i];
    if (c.size() > 3 && c.rfind("pci", 0) == 0 && std::isxdigit(static_cast<unsigned char>(c[3])))
      return std::vector<std::string>(parts.begin() + i, parts.end());
  }
  return {};
}

PathType byNuma(int numaA, int numaB) { return numaA == numaB ? PathType::PHB : PathType::SYS; }

int readNuma(const std::string& devDir) {
  std::ifstream f(devDir + "/numa_node");
  int v = -1;
  if (!(f >> v)) return -1;
  return v;
}

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool parseP2pLevel(const std::string& text, P2pLevel* out, std::string* why) {
  *out = P2pLevel{};
  if (text.empty()) return true;
  PathType level = PathType::SYS;
  if (topo::parsePathLevel(text, topo::kP2pLevelSyntax, &level)) {
    *out = P2pLevel{true, level};
    return true;
  }
  if (why != nullptr)
    *why = "NCCL_P2P_LEVEL=" + text + " is not a path level (" + topo::pathLevelNames(topo::kP2pLevelSyntax) +
           ", or a number 0-5)";
  return false;
}

P2pSettings makeP2pSettings(int64_t disableValue, const std::string& levelText) {
  P2pSettings s;
  s.disabled = disableValue != 0;
  std::string why;
  if (!parseP2pLevel(levelText, &s.level, &why)) s.warning = why + "; ignoring it (no path limit)";
  return s;
}

P2pSettings currentP2pSettings() {
  P2pSettings s = makeP2pSettings(params::p2pDisable(), params::p2pLevel());
  if (!s.warning.empty()) {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(s.warning).second) CHORUS_WARN(kLogP2P | kLogEnv, "p2p: %s", s.warning.c_str());
  }
  return s;
}

bool p2pAllowed(const P2pSettings& settings, const P2pPairFacts& facts, std::string* why) {
  auto no = [why](std::string text) {
    if (why != nullptr) *why = std::move(text);
    return false;
  };
  if (settings.disabled) return no("NCCL_P2P_DISABLE is set");
  if (facts.sameDevice) return true;
  if (!facts.canAccessPeer) return no("the GPUs cannot access each other's memory (cudaDeviceCanAccessPeer)");
  if (settings.level.set && facts.path > settings.level.max)
    return no(std::string("path ") + topo::pathTypeName(facts.path) +
              " is beyond NCCL_P2P_LEVEL=" + topo::pathTypeName(settings.level.max));
  return true;
}

bool p2pCandidates(const PeerInfo& self, const PeerInfo& peer) {
  // Processes that see different GPUs could decide differently (one sees the
  // other's GPU, the other does not): they stage through host memory, both.
  const bool sameView = self.processToken == peer.processToken || self.visibleGpus == peer.visibleGpus;
  return self.hostMode == 0 && peer.hostMode == 0 && self.hostHash == peer.hostHash && self.cudaDev >= 0 &&
         peer.cudaDev >= 0 && sameView;
}

PathType pciPathClass(const std::string& sysPathA, const std::string& sysPathB, int numaA, int numaB) {
  const std::vector<std::string> a = splitPath(sysPathA), b = splitPath(sysPathB);
  if (a.empty() || b.empty()) return byNuma(numaA, numaB);
  if (a == b) return PathType::LOC;
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  if (common == 0) return byNuma(numaA, numaB);  // different host bridges
  if (common == 1) return PathType::PHB;         // different root ports of one host bridge
  // The deepest common ancestor is a PCI bridge: traffic stays below the CPU.
  // Upstream port -> downstream port -> device on both sides is one switch.
  return (a.size() - common <= 2 && b.size() - common <= 2) ? PathType::PIX : PathType::PXB;
}

PathType pciPathFromSysfs(const std::string& busIdA, const std::string& busIdB, const std::string& sysfsRoot) {
  auto resolve = [&](const std::string& busId, int* numa) {
    const std::string id = lowerCase(topo::normalizeBusId(busId));
    *numa = -1;
    if (id.empty()) return std::string();
    const std::string dir = sysfsRoot + "/bus/pci/devices/" + id;
    *numa = readNuma(dir);
    char buf[PATH_MAX];
    return realpath(dir.c_str(), buf) != nullptr ? std::string(buf) : std::string();
  };
  int numaA = -1, numaB = -1;
  const std::string a = resolve(busIdA, &numaA), b = resolve(busIdB, &numaB);
  return pciPathClass(a, b, numaA, numaB);
}

bool mpsControlPipePresent() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp/nvidia-mps") + "/control";
  return access(path.c_str(), F_OK) == 0;
}

}  // namespace chorus::p2p
