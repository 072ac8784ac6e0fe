// What the two ends of a verbs connection exchange before their queue pairs
// can talk: QP number, addressing (LID or GID), starting PSN, MTU, and -- from
// the sender -- where its receive FIFO lives (address + rkey), so that the
// receiver can RDMA-write posted-buffer descriptors into it. Fixed 64-byte
// little-endian record; decode validates every field, so a peer speaking
// another protocol (or garbage) is refused with a message, never trusted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "nccl.h"
#include "transports/net_ib/ib_sysfs_port.h"

namespace chorus::ib {

struct IbConnMeta {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  uint16_t lid = 0;
  uint8_t mtu = 0;  // IBV_MTU_* value 1 (256) .. 5 (4096)
  uint8_t port = 0;
  LinkLayer linkLayer = LinkLayer::InfiniBand;
  uint8_t gidIndex = 0;
  std::array<uint8_t, 16> gid{};
  uint64_t fifoAddr = 0;  // sender only; 0 from the receiver
  uint32_t fifoRkey = 0;
};

constexpr size_t kConnMetaBytes = 64;

void encodeConnMeta(const IbConnMeta& meta, uint8_t out[kConnMetaBytes]);
// ncclRemoteError with a message when the record is malformed: bad magic or
// version, QPN/PSN over 24 bits or QPN 0, MTU out of range, unknown link
// layer, IB without LID, RoCE without GID, port 0.
ncclResult_t decodeConnMeta(const uint8_t* in, size_t len, IbConnMeta* meta);

}  // namespace chorus::ib
