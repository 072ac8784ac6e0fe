// The IB backend's connection record (transports/net_ib/ib_conn_meta.h),
// exchanged over a TCP side channel during setup. Whatever decodeConnMeta
// accepts must satisfy the limits it promises and survive a round trip.
#include <cstring>

#include "fuzz_target.h"
#include "transports/net_ib/ib_conn_meta.h"

namespace chorus::fuzz {

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  for (ib::LinkLayer ll : {ib::LinkLayer::InfiniBand, ib::LinkLayer::Ethernet}) {
    ib::IbConnMeta m;
    m.qpn = 0x123;
    m.psn = 0x456;
    m.lid = 7;
    m.mtu = 5;
    m.port = 1;
    m.linkLayer = ll;
    m.gid.fill(0xfe);
    m.fifoAddr = 0x1000;
    m.fifoRkey = 9;
    Bytes b(ib::kConnMetaBytes);
    ib::encodeConnMeta(m, b.data());
    out.push_back(b);
  }
  return out;
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  ib::IbConnMeta m;
  if (ib::decodeConnMeta(data, size, &m) != ncclSuccess) return 0;
  fuzz::fuzzCheck(m.qpn != 0 && m.qpn < (1u << 24) && m.psn < (1u << 24), "qpn/psn bounds");
  fuzz::fuzzCheck(m.mtu >= 1 && m.mtu <= 5 && m.port != 0, "mtu/port bounds");
  uint8_t again[ib::kConnMetaBytes];
  ib::encodeConnMeta(m, again);
  ib::IbConnMeta m2;
  fuzz::fuzzCheck(ib::decodeConnMeta(again, sizeof(again), &m2) == ncclSuccess, "re-encoded record decodes");
  fuzz::fuzzCheck(m2.qpn == m.qpn && m2.psn == m.psn && m2.lid == m.lid && m2.gid == m.gid &&
                      m2.fifoAddr == m.fifoAddr && m2.fifoRkey == m.fifoRkey,
                  "record round trip");
  return 0;
}
