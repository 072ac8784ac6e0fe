#include "bootstrap/unique_id.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/store_registry.h"
#include "core/host_identity.h"
#include "core/little_endian.h"
#include "core/params.h"
#include "core/result.h"

namespace chorus {
namespace {

constexpr uint32_t kIdMagic = 0x44494843;  // "CHID"
constexpr uint16_t kIdVersion = 1;
constexpr uint16_t kFlagCommId = 1;
constexpr uint16_t kFamilyV4 = 4, kFamilyV6 = 6;
enum Offset : size_t {
  kOffMagic = 0, kOffVersion = 4, kOffFlags = 6, kOffSecret = 8, kOffHostHash = 24, kOffPid = 32,
  kOffFamily = 36, kOffPort = 38, kOffAddr = 40, kOffScope = 56, kIdUsedBytes = 60,
};
static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128);
static_assert(kIdUsedBytes <= NCCL_UNIQUE_ID_BYTES, "unique id layout does not fit");
static_assert(kOffHostHash - kOffSecret == wire::kSecretBytes);

uint8_t* bytesOf(ncclUniqueId* id) { return reinterpret_cast<uint8_t*>(id->internal); }
const uint8_t* bytesOf(const ncclUniqueId& id) { return reinterpret_cast<const uint8_t*>(id.internal); }


uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// splitmix64's finalizer: spreads FNV's weak low bits over the whole word.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

ncclResult_t randomSecret(wire::Secret* s) {
  size_t got = 0;
  while (got < s->size()) {
    ssize_t n = getrandom(s->data() + got, s->size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (got == s->size()) return ncclSuccess;
  // Old kernels without getrandom: fall back to the device.
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(ncclSystemError, "bootstrap: no source of randomness for the unique id secret: %s", strerror(errno));
  ssize_t n = read(fd, s->data(), s->size());
  close(fd);
  if (n != static_cast<ssize_t>(s->size()))
    return fail(ncclSystemError, "bootstrap: could not read a random secret from /dev/urandom");
  return ncclSuccess;
}

// Decodes without logging; *why says what is wrong.
bool decodeQuiet(const ncclUniqueId& id, UniqueIdInfo* info, std::string* why) {
  const uint8_t* p = bytesOf(id);
  auto magic = static_cast<uint32_t>(loadLittleEndian(p + kOffMagic, 4));
  auto version = static_cast<uint16_t>(loadLittleEndian(p + kOffVersion, 2));
  if (magic != kIdMagic) {
    *why = "bad magic: not produced by ncclGetUniqueId of this library, or damaged in transit";
    return false;
  }
  if (version != kIdVersion) {
    *why = "id format version " + std::to_string(version) + ", this library reads " + std::to_string(kIdVersion);
    return false;
  }
  UniqueIdInfo out;
  out.commIdMode = (loadLittleEndian(p + kOffFlags, 2) & kFlagCommId) != 0;
  memcpy(out.secret.data(), p + kOffSecret, out.secret.size());
  out.hostHash = loadLittleEndian(p + kOffHostHash, 8);
  out.pid = static_cast<uint32_t>(loadLittleEndian(p + kOffPid, 4));
  auto family = static_cast<uint16_t>(loadLittleEndian(p + kOffFamily, 2));
  auto port = static_cast<uint16_t>(loadLittleEndian(p + kOffPort, 2));
  if (family == kFamilyV4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.addr.storage);
    sin->sin_family = AF_INET;
    memcpy(&sin->sin_addr, p + kOffAddr, 4);
    out.addr.len = sizeof(sockaddr_in);
  } else if (family == kFamilyV6) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.addr.storage);
    sin6->sin6_family = AF_INET6;
    memcpy(&sin6->sin6_addr, p + kOffAddr, 16);
    sin6->sin6_scope_id = static_cast<uint32_t>(loadLittleEndian(p + kOffScope, 4));
    out.addr.len = sizeof(sockaddr_in6);
  } else {
    *why = "unknown address family " + std::to_string(family);
    return false;
  }
  out.addr.setPort(port);
  *info = out;
  return true;
}

}  // namespace

void encodeUniqueId(const UniqueIdInfo& info, ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  uint8_t* p = bytesOf(id);
  storeLittleEndian(p + kOffMagic, kIdMagic, 4);
  storeLittleEndian(p + kOffVersion, kIdVersion, 2);
  storeLittleEndian(p + kOffFlags, info.commIdMode ? kFlagCommId : 0, 2);
  memcpy(p + kOffSecret, info.secret.data(), info.secret.size());
  storeLittleEndian(p + kOffHostHash, info.hostHash, 8);
  storeLittleEndian(p + kOffPid, info.pid, 4);
  storeLittleEndian(p + kOffPort, info.addr.port(), 2);
  if (info.addr.family() == AF_INET) {
    storeLittleEndian(p + kOffFamily, kFamilyV4, 2);
    memcpy(p + kOffAddr, &reinterpret_cast<const sockaddr_in*>(&info.addr.storage)->sin_addr, 4);
  } else {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&info.addr.storage);
    storeLittleEndian(p + kOffFamily, kFamilyV6, 2);
    memcpy(p + kOffAddr, &sin6->sin6_addr, 16);
    storeLittleEndian(p + kOffScope, sin6->sin6_scope_id, 4);
  }
}

ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdInfo* info) {
  std::string why;
  if (!decodeQuiet(id, info, &why)) return fail(ncclInvalidArgument, "bootstrap: invalid unique id (%s)", why.c_str());
  return ncclSuccess;
}

bool isValidUniqueId(const ncclUniqueId& id) {
  UniqueIdInfo info;
  std::string why;
  return decodeQuiet(id, &info, &why);
}

std::string describeUniqueId(const ncclUniqueId& id) {
  UniqueIdInfo info;
  std::string why;
  if (!decodeQuiet(id, &info, &why)) return "<invalid unique id>";
  return info.addr.str();
}

wire::Secret deriveSecret(const std::string& commId, const std::string& commSecret) {
  std::string material = commSecret.empty() ? "chorus/comm-id/" + commId : "chorus/secret/" + commSecret;
  uint64_t a = mix(fnv1a(material, 0xcbf29ce484222325ull));
  uint64_t b = mix(fnv1a(material, 0x84222325cbf29ce4ull) ^ a);
  wire::Secret s{};
  storeLittleEndian(s.data(), a, 8);
  storeLittleEndian(s.data() + 8, b, 8);
  return s;
}

ncclResult_t createUniqueIdFrom(const std::string& commId, const std::string& commSecret,
                                const std::string& ifnameSpec, ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  UniqueIdInfo info;
  if (!commId.empty()) {
    // pid and host hash stay 0 so that every process computes the very same bytes.
    CHORUS_CHECK(parseHostPort(commId, &info.addr));
    if (info.addr.port() == 0)
      return fail(ncclInvalidArgument, "bootstrap: NCCL_COMM_ID=%s needs a port other than 0", commId.c_str());
    info.secret = deriveSecret(commId, commSecret);
    info.commIdMode = true;
    CHORUS_INFO(kLogInit | kLogBootstrap, "bootstrap: NCCL_COMM_ID=%s: rank 0 will serve the store at %s (secret %s)",
                commId.c_str(), info.addr.str().c_str(),
                commSecret.empty() ? "derived from NCCL_COMM_ID; set CHORUS_COMM_SECRET for a private one"
                                   : "from CHORUS_COMM_SECRET");
  } else {
    info.hostHash = hostHash();
    info.pid = static_cast<uint32_t>(getpid());
    InterfaceInfo ifc;
    CHORUS_CHECK(chooseInterface(ifnameSpec, &ifc));
    CHORUS_CHECK(randomSecret(&info.secret));
    CHORUS_CHECK(startRegisteredServer(ifc.addr, info.secret, &info.addr));
  }
  encodeUniqueId(info, id);
  return ncclSuccess;
}

ncclResult_t createUniqueId(ncclUniqueId* id) {
  return createUniqueIdFrom(params::commId(), params::commSecret(), params::socketIfname(), id);
}

}  // namespace chorus
