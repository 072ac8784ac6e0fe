// Fixed-width little-endian fields in byte buffers: the one encoding of every
// wire and handle format of the library (unique ids, the store's frames and
// counters, network handles and connection records), independent of the
// host's byte order and of alignment.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus {

// Writes the low `bytes` (1..8) bytes of `v` at p, least significant first.
inline void storeLittleEndian(uint8_t* p, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Reads `bytes` (1..8) bytes at p, least significant first.
inline uint64_t loadLittleEndian(const uint8_t* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace chorus
