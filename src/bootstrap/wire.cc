#include "bootstrap/wire.h"
#include "core/little_endian.h"

namespace chorus::wire {

Writer::Writer(Op op, uint32_t reqId) {
  buf_.resize(kHeaderBytes);
  u8(static_cast<uint8_t>(op));
  u32(reqId);
}

Writer& Writer::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}

Writer& Writer::u16(uint16_t v) { return field(v, 2); }

Writer& Writer::u32(uint32_t v) { return field(v, 4); }

Writer& Writer::i64(int64_t v) { return field(static_cast<uint64_t>(v), 8); }

Writer& Writer::field(uint64_t v, size_t bytes) {
  const size_t at = buf_.size();
  buf_.resize(at + bytes);
  storeLittleEndian(buf_.data() + at, v, bytes);
  return *this;
}

Writer& Writer::raw(const uint8_t* p, size_t n) {
  buf_.insert(buf_.end(), p, p + n);
  return *this;
}

Writer& Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  return raw(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

Writer& Writer::bytes(const std::vector<uint8_t>& b) {
  u32(static_cast<uint32_t>(b.size()));
  return raw(b.data(), b.size());
}

std::vector<uint8_t> Writer::finish() {
  auto len = static_cast<uint32_t>(buf_.size() - kHeaderBytes);
  storeLittleEndian(buf_.data(), len, 4);
  return std::move(buf_);
}

bool Reader::u8(uint8_t* v) { return raw(v, 1); }

bool Reader::u16(uint16_t* v) {
  uint8_t b[2];
  if (!raw(b, 2)) return false;
  *v = static_cast<uint16_t>(loadLittleEndian(b, 2));
  return true;
}

bool Reader::u32(uint32_t* v) {
  uint8_t b[4];
  if (!raw(b, 4)) return false;
  *v = readLength(b);
  return true;
}

bool Reader::i64(int64_t* v) {
  uint8_t b[8];
  if (!raw(b, 8)) return false;
  *v = static_cast<int64_t>(loadLittleEndian(b, 8));
  return true;
}

bool Reader::raw(uint8_t* out, size_t n) {
  if (n > n_ - pos_) return false;
  for (size_t i = 0; i < n; ++i) out[i] = p_[pos_ + i];
  pos_ += n;
  return true;
}

bool Reader::str(std::string* s) {
  uint32_t len = 0;
  if (!u32(&len) || len > n_ - pos_) return false;
  s->assign(reinterpret_cast<const char*>(p_ + pos_), len);
  pos_ += len;
  return true;
}

bool Reader::bytes(std::vector<uint8_t>* b) {
  uint32_t len = 0;
  if (!u32(&len) || len > n_ - pos_) return false;
  b->assign(p_ + pos_, p_ + pos_ + len);
  pos_ += len;
  return true;
}

uint32_t readLength(const uint8_t* p) { return static_cast<uint32_t>(loadLittleEndian(p, 4)); }

bool secretsEqual(const Secret& a, const Secret& b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

}  // namespace chorus::wire
