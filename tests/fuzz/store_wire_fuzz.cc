// The bootstrap store's frames (src/bootstrap/wire.h): the input is one
// frame's payload, parsed the way the server parses requests and the client
// parses replies, with wire::Reader. Every string or blob it accepts must lie
// inside the input, and what a Writer builds from it must read back the same.
#include <string>

#include "bootstrap/wire.h"
#include "fuzz_target.h"

namespace chorus::fuzz {
namespace {

using wire::Op;

// Re-encodes a string and a blob and checks they read back unchanged.
void roundTrip(const std::string& s, const Bytes& b) {
  const Bytes frame = wire::Writer(Op::Set, 7).str(s).bytes(b).finish();
  fuzzCheck(wire::readLength(frame.data()) == frame.size() - wire::kHeaderBytes, "frame length");
  wire::Reader r(frame.data() + wire::kHeaderBytes, frame.size() - wire::kHeaderBytes);
  uint8_t op = 0;
  uint32_t req = 0;
  std::string s2;
  Bytes b2;
  fuzzCheck(r.u8(&op) && r.u32(&req) && r.str(&s2) && r.bytes(&b2) && r.atEnd(), "re-read");
  fuzzCheck(op == static_cast<uint8_t>(Op::Set) && req == 7 && s2 == s && b2 == b, "round trip");
}

void parseRequest(wire::Reader& r, uint8_t op, size_t size) {
  std::string key;
  Bytes value;
  uint32_t u = 0;
  switch (static_cast<Op>(op)) {
    case Op::Hello: {
      uint16_t version = 0;
      wire::Secret secret{};
      if (r.u32(&u) && r.u16(&version) && r.raw(secret.data(), secret.size()) && r.u32(&u)) (void)r.atEnd();
      (void)wire::secretsEqual(secret, wire::Secret{});
      break;
    }
    case Op::Set:
      if (r.str(&key) && r.bytes(&value)) {
        fuzzCheck(key.size() + value.size() <= size, "set fields inside the frame");
        roundTrip(key, value);
      }
      break;
    case Op::Get:
      if (!r.u32(&u)) break;
      for (uint32_t i = 0; i < u && r.str(&key); ++i) fuzzCheck(key.size() <= size, "get key inside the frame");
      break;
    case Op::Add: {
      int64_t delta = 0;
      if (r.str(&key) && r.i64(&delta)) (void)r.atEnd();
      break;
    }
    case Op::ErasePrefix:
      if (r.str(&key)) (void)r.atEnd();
      break;
    case Op::Cancel:
      if (r.u32(&u)) (void)r.atEnd();
      break;
    default:
      break;
  }
}

// A reply: status, then a Get's values, a cancelled Get's count and key, or
// an error's message.
void parseReply(wire::Reader& r, size_t size) {
  uint8_t status = 0;
  uint32_t n = 0;
  if (!r.u8(&status) || !r.u32(&n)) return;
  Bytes value;
  for (uint32_t i = 0; i < n && r.bytes(&value); ++i) fuzzCheck(value.size() <= size, "reply value inside the frame");
  std::string msg;
  if (r.str(&msg)) fuzzCheck(msg.size() <= size, "reply message inside the frame");
}

}  // namespace

std::vector<Bytes> seeds() {
  auto payload = [](wire::Writer w) {
    Bytes f = w.finish();
    return Bytes(f.begin() + wire::kHeaderBytes, f.end());
  };
  return {
      payload(wire::Writer(Op::Hello, 1).u32(wire::kMagic).u16(wire::kVersion).raw(wire::Secret{}.data(), 16).u32(3)),
      payload(wire::Writer(Op::Set, 2).str("key/a").bytes({1, 2, 3, 4})),
      payload(wire::Writer(Op::Get, 3).u32(2).str("key/a").str("key/b")),
      payload(wire::Writer(Op::Add, 4).str("counter").i64(-5)),
      payload(wire::Writer(Op::ErasePrefix, 5).str("key/")),
      payload(wire::Writer(Op::Cancel, 6).u32(3)),
      payload(wire::Writer(Op::Reply, 3).u8(0).u32(2).bytes({9}).bytes({8, 7})),
      payload(wire::Writer(Op::Reply, 3).u8(1).u32(1).str("key/b")),
  };
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  if (size >= 4) (void)wire::readLength(data);
  wire::Reader r(data, size);
  uint8_t op = 0;
  uint32_t req = 0;
  if (!r.u8(&op) || !r.u32(&req)) return 0;
  if (op == static_cast<uint8_t>(wire::Op::Reply))
    fuzz::parseReply(r, size);
  else
    fuzz::parseRequest(r, op, size);
  return 0;
}
