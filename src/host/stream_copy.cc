#include "host/stream_copy.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "host/host_reduce.h"

namespace chorus::host {
namespace {

__attribute__((target("avx2"))) void streamCopyAvx2(char* dst, const char* src, size_t bytes) {
  // Head: plain copy up to 32-byte alignment of dst.
  const size_t head = (32 - (reinterpret_cast<uintptr_t>(dst) & 31)) & 31;
  const size_t h = head < bytes ? head : bytes;
  std::memcpy(dst, src, h);
  dst += h;
  src += h;
  bytes -= h;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
    __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
}

}  // namespace

void streamCopy(void* dst, const void* src, size_t bytes) {
  if (bytes >= 4096 && activeSimdLevel() == SimdLevel::Avx2)
    streamCopyAvx2(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  else
    std::memcpy(dst, src, bytes);
}

void streamFence() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#endif
}

}  // namespace chorus::host
