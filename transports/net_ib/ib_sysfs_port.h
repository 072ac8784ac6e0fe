// What the verbs backend needs to know about one RDMA port, read from a
// sysfs-shaped tree (normally /sys/class/infiniband; tests pass a temporary
// directory): state, link layer, LID, and which GID to address it by.
//
// GID choice for Ethernet (RoCE) ports when NCCL_IB_GID_INDEX is not set
// (-1): the best-ranked non-zero GID, lowest index on ties, ranked
//   RoCE v2 + IPv4-mapped  >  RoCE v2 other global  >  RoCE v2 link-local
//   >  RoCE v1 (any).
// RoCE v2 with an IPv4-mapped address routes over IP like ordinary traffic,
// which is what clusters configure; link-local GIDs do not cross subnets.
// InfiniBand ports are addressed by LID; their GID index 0 is reported for
// completeness (used only when a GRH is required).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "nccl.h"

namespace chorus::ib {

enum class LinkLayer { InfiniBand, Ethernet };

struct IbPortAddress {
  LinkLayer linkLayer = LinkLayer::InfiniBand;
  uint16_t lid = 0;
  int gidIndex = 0;
  std::array<uint8_t, 16> gid{};
  bool roceV2 = false;
};

// Parses a sysfs GID ("fe80:0000:...:0001", eight groups of four hex digits).
bool parseGid(const std::string& text, std::array<uint8_t, 16>* gid);
bool gidIsZero(const std::array<uint8_t, 16>& gid);
bool gidIsIpv4Mapped(const std::array<uint8_t, 16>& gid);
bool gidIsLinkLocal(const std::array<uint8_t, 16>& gid);

// Reads <sysRoot>/<device>/ports/<port>/... and picks the address.
// forcedGidIndex >= 0 (NCCL_IB_GID_INDEX) uses that index, which must exist
// and be non-zero. Errors (ncclSystemError, with a message): port missing or
// not ACTIVE, unknown link layer, IB port without a LID, no usable GID.
ncclResult_t readPortAddress(const std::string& sysRoot, const std::string& device, int port, int forcedGidIndex,
                             IbPortAddress* out);

}  // namespace chorus::ib
