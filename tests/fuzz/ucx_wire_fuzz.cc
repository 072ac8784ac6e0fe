// UCX connection setup (transports/net_ucx/ucx_wire.h): the listen handle
// (128 bytes), then a Hello (16) and a Welcome (8) from the stream. Anything
// decoded must re-encode to bytes that decode to the same values.
#include <cstring>

#include "chorus/net_plugin.h"
#include "fuzz_target.h"
#include "transports/net_ucx/ucx_wire.h"

namespace chorus::fuzz {

std::vector<Bytes> seeds() {
  ucx::ListenHandle h;
  parseHostPort("127.0.0.1:4100", &h.addr);
  h.listenId = 99;
  Bytes b(CHORUS_NET_HANDLE_BYTES + ucx::kHelloBytes + ucx::kWelcomeBytes, 0);
  ucx::encodeListenHandle(h, b.data());
  ucx::encodeHello(99, b.data() + CHORUS_NET_HANDLE_BYTES);
  ucx::encodeWelcome(3, b.data() + CHORUS_NET_HANDLE_BYTES + ucx::kHelloBytes);
  return {b};
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  uint8_t in[CHORUS_NET_HANDLE_BYTES + ucx::kHelloBytes + ucx::kWelcomeBytes] = {};
  std::memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
  ucx::ListenHandle h;
  if (ucx::decodeListenHandle(in, &h) == ncclSuccess) {
    uint8_t again[CHORUS_NET_HANDLE_BYTES] = {};
    ucx::encodeListenHandle(h, again);
    ucx::ListenHandle h2;
    fuzz::fuzzCheck(ucx::decodeListenHandle(again, &h2) == ncclSuccess, "re-encoded handle decodes");
    fuzz::fuzzCheck(h2.listenId == h.listenId && h2.addr.str() == h.addr.str(), "handle round trip");
  }
  uint64_t listenId = 0;
  if (ucx::decodeHello(in + CHORUS_NET_HANDLE_BYTES, &listenId)) {
    uint8_t again[ucx::kHelloBytes];
    ucx::encodeHello(listenId, again);
    uint64_t id2 = 0;
    fuzz::fuzzCheck(ucx::decodeHello(again, &id2) && id2 == listenId, "hello round trip");
  }
  uint32_t connId = 0;
  if (ucx::decodeWelcome(in + CHORUS_NET_HANDLE_BYTES + ucx::kHelloBytes, &connId)) {
    uint8_t again[ucx::kWelcomeBytes];
    ucx::encodeWelcome(connId, again);
    uint32_t id2 = 0;
    fuzz::fuzzCheck(ucx::decodeWelcome(again, &id2) && id2 == connId, "welcome round trip");
  }
  return 0;
}
