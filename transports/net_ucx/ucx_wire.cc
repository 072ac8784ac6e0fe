#include "transports/net_ucx/ucx_wire.h"

#include <netinet/in.h>

#include <cstring>

#include "chorus/net_plugin.h"
#include "core/little_endian.h"
#include "core/result.h"

namespace chorus::ucx {
namespace {

constexpr uint32_t kHandleMagic = 0x43554358;   // "CUCX"
constexpr uint32_t kHelloMagic = 0x48454c4f;    // "HELO"
constexpr uint32_t kWelcomeMagic = 0x57454c43;  // "WELC"

// Handle layout (little endian): magic u32 | family u16 | port u16 |
// address 16 bytes | listenId u64 | zero padding.
constexpr size_t kFamilyOffset = 4;
constexpr size_t kPortOffset = 6;
constexpr size_t kAddrOffset = 8;
constexpr size_t kListenIdOffset = 24;
static_assert(kListenIdOffset + 8 <= CHORUS_NET_HANDLE_BYTES);

}  // namespace

void encodeListenHandle(const ListenHandle& handle, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  std::memset(p, 0, CHORUS_NET_HANDLE_BYTES);
  storeLittleEndian(p, kHandleMagic, 4);
  storeLittleEndian(p + kFamilyOffset, static_cast<uint64_t>(handle.addr.family()), 2);
  storeLittleEndian(p + kPortOffset, handle.addr.port(), 2);
  if (handle.addr.family() == AF_INET)
    std::memcpy(p + kAddrOffset, &reinterpret_cast<const sockaddr_in*>(handle.addr.sa())->sin_addr, 4);
  else if (handle.addr.family() == AF_INET6)
    std::memcpy(p + kAddrOffset, &reinterpret_cast<const sockaddr_in6*>(handle.addr.sa())->sin6_addr, 16);
  storeLittleEndian(p + kListenIdOffset, handle.listenId, 8);
}

ncclResult_t decodeListenHandle(const void* in, ListenHandle* handle) {
  if (in == nullptr) return fail(ncclInvalidArgument, "NET/UCX: connect handle is NULL");
  const auto* p = static_cast<const uint8_t*>(in);
  if (loadLittleEndian(p, 4) != kHandleMagic)
    return fail(ncclInvalidArgument, "NET/UCX: handle is not a UCX listen handle");
  auto family = static_cast<int>(loadLittleEndian(p + kFamilyOffset, 2));
  auto port = static_cast<uint16_t>(loadLittleEndian(p + kPortOffset, 2));
  if (port == 0) return fail(ncclInvalidArgument, "NET/UCX: handle carries port 0");
  SockAddr addr;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(addr.sa());
    sin->sin_family = AF_INET;
    std::memcpy(&sin->sin_addr, p + kAddrOffset, 4);
    addr.len = sizeof(sockaddr_in);
  } else if (family == AF_INET6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(addr.sa());
    sin6->sin6_family = AF_INET6;
    std::memcpy(&sin6->sin6_addr, p + kAddrOffset, 16);
    addr.len = sizeof(sockaddr_in6);
  } else {
    return fail(ncclInvalidArgument, "NET/UCX: handle carries unknown address family %d", family);
  }
  addr.setPort(port);
  handle->addr = addr;
  handle->listenId = loadLittleEndian(p + kListenIdOffset, 8);
  return ncclSuccess;
}

void encodeHello(uint64_t listenId, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  storeLittleEndian(out, kHelloMagic, 4);
  storeLittleEndian(out + 8, listenId, 8);
}

bool decodeHello(const uint8_t in[kHelloBytes], uint64_t* listenId) {
  if (loadLittleEndian(in, 4) != kHelloMagic) return false;
  *listenId = loadLittleEndian(in + 8, 8);
  return true;
}

void encodeWelcome(uint32_t connId, uint8_t out[kWelcomeBytes]) {
  storeLittleEndian(out, kWelcomeMagic, 4);
  storeLittleEndian(out + 4, connId, 4);
}

bool decodeWelcome(const uint8_t in[kWelcomeBytes], uint32_t* connId) {
  if (loadLittleEndian(in, 4) != kWelcomeMagic) return false;
  *connId = static_cast<uint32_t>(loadLittleEndian(in + 4, 4));
  return *connId != 0;
}

}  // namespace chorus::ucx
