// The TCP store protocol. Every message is a frame:
//
//   u32 length (of what follows) | u8 op | u32 request id | body
//
// little-endian throughout. The first frame on a connection must be Hello
// (magic, version, the 16-byte secret from the unique id, the client's rank);
// until it is accepted frames are capped at kMaxHelloBytes, afterwards at
// kMaxFrameBytes. Requests: Set(key, value), Get(n, keys...), Add(key, delta),
// ErasePrefix(prefix), Cancel(request id of a pending Get). The server answers
// each request (except Cancel) with one Reply frame carrying the request's id,
// a Status byte and a body: Get -> n values; Add -> the new value; a cancelled
// Get -> number of keys still missing and the first of them; Error -> message.
// Strings and byte blobs are a u32 length followed by the bytes.
//
// The secret authenticates the client; it is not encrypted, so anyone who can
// read the bootstrap network's traffic can learn it (as with NCCL's own id).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::wire {

constexpr uint32_t kMagic = 0x54534843;  // "CHST"
constexpr uint16_t kVersion = 1;
constexpr size_t kSecretBytes = 16;
using Secret = std::array<uint8_t, kSecretBytes>;

constexpr uint32_t kMaxFrameBytes = 64u << 20;
constexpr uint32_t kMaxHelloBytes = 256;
constexpr size_t kHeaderBytes = 4;
constexpr uint32_t kMinFrameBytes = 5;  // op + request id

enum class Op : uint8_t { Hello = 1, Set = 2, Get = 3, Add = 4, ErasePrefix = 5, Cancel = 6, Reply = 0x80 };
enum class Status : uint8_t { Ok = 0, Cancelled = 1, Error = 2 };

// Builds one frame; finish() fills in the length.
class Writer {
 public:
  Writer(Op op, uint32_t reqId);
  Writer& u8(uint8_t v);
  Writer& u16(uint16_t v);
  Writer& u32(uint32_t v);
  Writer& i64(int64_t v);
  Writer& raw(const uint8_t* p, size_t n);
  Writer& str(const std::string& s);
  Writer& bytes(const std::vector<uint8_t>& b);
  std::vector<uint8_t> finish();
  size_t size() const { return buf_.size(); }

 private:
  Writer& field(uint64_t v, size_t bytes);  // little-endian
  std::vector<uint8_t> buf_;
};

// Reads a frame's payload (after the length); every accessor fails instead of
// reading past the end, so malformed input from a stranger is harmless.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool u8(uint8_t* v);
  bool u16(uint16_t* v);
  bool u32(uint32_t* v);
  bool i64(int64_t* v);
  bool raw(uint8_t* out, size_t n);
  bool str(std::string* s);
  bool bytes(std::vector<uint8_t>* b);
  bool atEnd() const { return pos_ == n_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

uint32_t readLength(const uint8_t* p);

// Constant-time comparison so that response timing does not reveal how many
// leading bytes of a guessed secret were right.
bool secretsEqual(const Secret& a, const Secret& b);

}  // namespace chorus::wire
