// Unique ids (src/bootstrap/unique_id.h): 128 bytes that travel from rank 0
// to the others through the application (MPI, a file, the network). Any
// bytes must be rejected or accepted without a crash; an accepted id must
// re-encode to one that decodes to the same address and secret.
#include <cstring>
#include <string>

#include "bootstrap/unique_id.h"
#include "fuzz_target.h"

namespace chorus::fuzz {

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  for (const char* addr : {"127.0.0.1", "::1"}) {
    UniqueIdInfo info;
    parseHostPort(std::string(addr[0] == ':' ? "[" : "") + addr + (addr[0] == ':' ? "]" : "") + ":29500", &info.addr);
    info.secret.fill(0x5a);
    info.hostHash = 0x1234;
    info.pid = 42;
    ncclUniqueId id{};
    encodeUniqueId(info, &id);
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    out.emplace_back(p, p + sizeof(id));
  }
  return out;
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  ncclUniqueId id{};
  std::memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
  (void)isValidUniqueId(id);
  (void)describeUniqueId(id);
  UniqueIdInfo info;
  if (decodeUniqueId(id, &info) != ncclSuccess) return 0;
  ncclUniqueId again{};
  encodeUniqueId(info, &again);
  UniqueIdInfo info2;
  fuzz::fuzzCheck(decodeUniqueId(again, &info2) == ncclSuccess, "a re-encoded id decodes");
  fuzz::fuzzCheck(info2.addr.str() == info.addr.str() && info2.secret == info.secret, "id round trip");
  return 0;
}
