#include "transports/net_ib/ib_sysfs_port.h"

#include <cstdlib>
#include <fstream>

#include "core/result.h"

namespace chorus::ib {
namespace {

constexpr int kMaxGidEntries = 256;

bool readLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  if (!in || !std::getline(in, *line)) return false;
  while (!line->empty() && (line->back() == '\n' || line->back() == ' ' || line->back() == '\r')) line->pop_back();
  return true;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Higher is better; -1: not usable.
int gidRank(const std::array<uint8_t, 16>& gid, const std::string& type) {
  if (gidIsZero(gid)) return -1;
  bool v2 = type.find("v2") != std::string::npos;
  if (!v2) return 0;
  if (gidIsIpv4Mapped(gid)) return 3;
  return gidIsLinkLocal(gid) ? 1 : 2;
}

ncclResult_t readGid(const std::string& portDir, int index, std::array<uint8_t, 16>* gid, std::string* type) {
  std::string text;
  if (!readLine(portDir + "/gids/" + std::to_string(index), &text) || !parseGid(text, gid)) return ncclSystemError;
  if (!readLine(portDir + "/gid_attrs/types/" + std::to_string(index), type)) type->clear();
  return ncclSuccess;
}

ncclResult_t pickRoceGid(const std::string& portDir, int forced, IbPortAddress* out) {
  std::array<uint8_t, 16> gid{};
  std::string type;
  if (forced >= 0) {
    if (readGid(portDir, forced, &gid, &type) != ncclSuccess || gidIsZero(gid))
      return fail(ncclSystemError, "NET/IB: %s has no usable GID at NCCL_IB_GID_INDEX=%d", portDir.c_str(), forced);
    out->gidIndex = forced;
    out->gid = gid;
    out->roceV2 = type.find("v2") != std::string::npos;
    return ncclSuccess;
  }
  int bestRank = -1;
  for (int i = 0; i < kMaxGidEntries; ++i) {
    if (readGid(portDir, i, &gid, &type) != ncclSuccess) break;
    int rank = gidRank(gid, type);
    if (rank <= bestRank) continue;
    bestRank = rank;
    out->gidIndex = i;
    out->gid = gid;
    out->roceV2 = type.find("v2") != std::string::npos;
  }
  if (bestRank < 0) return fail(ncclSystemError, "NET/IB: %s has no non-zero GID", portDir.c_str());
  return ncclSuccess;
}

}  // namespace

bool parseGid(const std::string& text, std::array<uint8_t, 16>* gid) {
  std::array<uint8_t, 16> bytes{};
  size_t pos = 0;
  for (int group = 0; group < 8; ++group) {
    if (group > 0) {
      if (pos >= text.size() || text[pos] != ':') return false;
      ++pos;
    }
    if (pos + 4 > text.size()) return false;
    int value = 0;
    for (int k = 0; k < 4; ++k) {
      int d = hexDigit(text[pos + k]);
      if (d < 0) return false;
      value = value * 16 + d;
    }
    bytes[2 * group] = static_cast<uint8_t>(value >> 8);
    bytes[2 * group + 1] = static_cast<uint8_t>(value & 0xff);
    pos += 4;
  }
  if (pos != text.size()) return false;
  *gid = bytes;
  return true;
}

bool gidIsZero(const std::array<uint8_t, 16>& gid) {
  for (uint8_t b : gid)
    if (b != 0) return false;
  return true;
}

bool gidIsIpv4Mapped(const std::array<uint8_t, 16>& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid[i] != 0) return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

bool gidIsLinkLocal(const std::array<uint8_t, 16>& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

ncclResult_t readPortAddress(const std::string& sysRoot, const std::string& device, int port, int forcedGidIndex,
                             IbPortAddress* out) {
  std::string portDir = sysRoot + "/" + device + "/ports/" + std::to_string(port);
  std::string state, linkLayer;
  if (!readLine(portDir + "/state", &state))
    return fail(ncclSystemError, "NET/IB: %s:%d has no port state in %s", device.c_str(), port, portDir.c_str());
  if (state.find("ACTIVE") == std::string::npos)
    return fail(ncclSystemError, "NET/IB: %s:%d is not active (%s)", device.c_str(), port, state.c_str());
  if (!readLine(portDir + "/link_layer", &linkLayer)) linkLayer = "InfiniBand";
  IbPortAddress addr;
  if (linkLayer == "Ethernet") {
    addr.linkLayer = LinkLayer::Ethernet;
    CHORUS_CHECK(pickRoceGid(portDir, forcedGidIndex, &addr));
  } else if (linkLayer == "InfiniBand") {
    addr.linkLayer = LinkLayer::InfiniBand;
    std::string lidText;
    long lid = 0;
    if (readLine(portDir + "/lid", &lidText)) lid = std::strtol(lidText.c_str(), nullptr, 0);
    if (lid <= 0 || lid >= 0xffff)
      return fail(ncclSystemError, "NET/IB: %s:%d is an InfiniBand port without a LID (subnet manager running?)",
                  device.c_str(), port);
    addr.lid = static_cast<uint16_t>(lid);
    addr.gidIndex = forcedGidIndex >= 0 ? forcedGidIndex : 0;
    std::string type;
    readGid(portDir, addr.gidIndex, &addr.gid, &type);  // optional for IB
  } else {
    return fail(ncclSystemError, "NET/IB: %s:%d has unknown link layer '%s'", device.c_str(), port, linkLayer.c_str());
  }
  *out = addr;
  return ncclSuccess;
}

}  // namespace chorus::ib
