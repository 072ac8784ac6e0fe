#include "transports/net_ib/ib_conn_meta.h"

#include <cstring>

#include "core/little_endian.h"
#include "core/result.h"

namespace chorus::ib {
namespace {

constexpr uint32_t kMetaMagic = 0x43494243;  // "CBIC"
constexpr uint8_t kMetaVersion = 1;
constexpr uint32_t k24Bits = 0xffffff;

// Layout: magic u32 @0 | version u8 @4 | linkLayer u8 @5 | mtu u8 @6 | port u8 @7 |
// qpn u32 @8 | psn u32 @12 | lid u16 @16 | gidIndex u8 @18 | pad @19 |
// gid 16 @20 | fifoAddr u64 @36 | fifoRkey u32 @44 | zero pad to 64.

}  // namespace

void encodeConnMeta(const IbConnMeta& meta, uint8_t out[kConnMetaBytes]) {
  std::memset(out, 0, kConnMetaBytes);
  storeLittleEndian(out, kMetaMagic, 4);
  out[4] = kMetaVersion;
  out[5] = meta.linkLayer == LinkLayer::Ethernet ? 2 : 1;
  out[6] = meta.mtu;
  out[7] = meta.port;
  storeLittleEndian(out + 8, meta.qpn, 4);
  storeLittleEndian(out + 12, meta.psn, 4);
  storeLittleEndian(out + 16, meta.lid, 2);
  out[18] = meta.gidIndex;
  std::memcpy(out + 20, meta.gid.data(), 16);
  storeLittleEndian(out + 36, meta.fifoAddr, 8);
  storeLittleEndian(out + 44, meta.fifoRkey, 4);
}

ncclResult_t decodeConnMeta(const uint8_t* in, size_t len, IbConnMeta* meta) {
  if (in == nullptr) return fail(ncclRemoteError, "NET/IB: no connection record");
  if (len != kConnMetaBytes)
    return fail(ncclRemoteError, "NET/IB: connection record of %zu bytes, expected %zu", len, kConnMetaBytes);
  if (loadLittleEndian(in, 4) != kMetaMagic)
    return fail(ncclRemoteError, "NET/IB: peer sent a record that is not ours");
  if (in[4] != kMetaVersion)
    return fail(ncclRemoteError, "NET/IB: peer speaks connection record version %u, we speak %u", in[4], kMetaVersion);
  IbConnMeta m;
  if (in[5] != 1 && in[5] != 2) return fail(ncclRemoteError, "NET/IB: peer sent unknown link layer %u", in[5]);
  m.linkLayer = in[5] == 2 ? LinkLayer::Ethernet : LinkLayer::InfiniBand;
  m.mtu = in[6];
  m.port = in[7];
  m.qpn = static_cast<uint32_t>(loadLittleEndian(in + 8, 4));
  m.psn = static_cast<uint32_t>(loadLittleEndian(in + 12, 4));
  m.lid = static_cast<uint16_t>(loadLittleEndian(in + 16, 2));
  m.gidIndex = in[18];
  std::memcpy(m.gid.data(), in + 20, 16);
  m.fifoAddr = loadLittleEndian(in + 36, 8);
  m.fifoRkey = static_cast<uint32_t>(loadLittleEndian(in + 44, 4));
  if (m.qpn == 0 || m.qpn > k24Bits) return fail(ncclRemoteError, "NET/IB: peer sent invalid QP number %u", m.qpn);
  if (m.psn > k24Bits) return fail(ncclRemoteError, "NET/IB: peer sent PSN %u wider than 24 bits", m.psn);
  if (m.mtu < 1 || m.mtu > 5) return fail(ncclRemoteError, "NET/IB: peer sent invalid MTU code %u", m.mtu);
  if (m.port == 0) return fail(ncclRemoteError, "NET/IB: peer sent port 0");
  if (m.linkLayer == LinkLayer::InfiniBand && m.lid == 0)
    return fail(ncclRemoteError, "NET/IB: InfiniBand peer sent LID 0");
  if (m.linkLayer == LinkLayer::Ethernet && gidIsZero(m.gid))
    return fail(ncclRemoteError, "NET/IB: RoCE peer sent a zero GID");
  *meta = m;
  return ncclSuccess;
}

}  // namespace chorus::ib
