// The socket backend's connection setup (transports/net_socket/socket_wire.h):
// the listen handle a peer sends through the bootstrap and the StreamHello
// that opens every stream. The first 128 bytes are a handle, the next 40 a
// hello; a hello the listener accepts must ask for a bounded connection.
#include <cstring>

#include "fuzz_target.h"
#include "transports/net_socket/socket_wire.h"

namespace chorus::fuzz {

std::vector<Bytes> seeds() {
  sock::Handle h{};
  h.magic = sock::kHandleMagic;
  h.family = AF_INET;
  h.port = 4000;
  h.addr[0] = 127;
  h.addr[3] = 1;
  h.nonce = 77;
  const sock::StreamHello hello{sock::kHelloMagic, 1, 2, 2, 77, 5, 9};
  Bytes b(CHORUS_NET_HANDLE_BYTES + sizeof(hello), 0);
  std::memcpy(b.data(), &h, sizeof(h));
  std::memcpy(b.data() + CHORUS_NET_HANDLE_BYTES, &hello, sizeof(hello));
  Bytes v6 = b;
  const uint16_t family6 = AF_INET6;
  std::memcpy(v6.data() + 4, &family6, sizeof(family6));
  return {b, v6};
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  uint8_t handle[CHORUS_NET_HANDLE_BYTES] = {};
  std::memcpy(handle, data, size < sizeof(handle) ? size : sizeof(handle));
  SockAddr addr;
  uint64_t nonce = 0;
  if (sock::decodeHandle(handle, &addr, &nonce) == ncclSuccess) {
    fuzz::fuzzCheck(addr.family() == AF_INET || addr.family() == AF_INET6, "handle family");
    (void)addr.str();
  }
  sock::StreamHello hello{};
  if (size > sizeof(handle)) std::memcpy(&hello, data + sizeof(handle), std::min(size - sizeof(handle), sizeof(hello)));
  if (sock::refuseHello(hello, nonce) != nullptr) return 0;
  const int64_t ndata = sock::helloDataStreams(hello);
  fuzz::fuzzCheck(ndata >= -1 && ndata <= static_cast<int64_t>(sock::kMaxStreams), "data streams bounded");
  if (ndata > 0) {
    // How a message is cut over the streams: contiguous, complete parts.
    size_t size64 = 0;
    std::memcpy(&size64, &hello.connId, sizeof(size64));
    size64 %= size_t(1) << 40;
    size_t next = 0;
    for (uint32_t i = 0; i < static_cast<uint32_t>(ndata); ++i) {
      size_t off = 0, bytes = 0;
      sock::splitMessage(size64, static_cast<uint32_t>(ndata), i, &off, &bytes);
      fuzz::fuzzCheck(off == next, "parts are contiguous");
      next = off + bytes;
    }
    fuzz::fuzzCheck(next == size64, "parts cover the message");
  }
  return 0;
}
