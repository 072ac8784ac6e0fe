#include "common/memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace chorus_bench {

namespace {
constexpr size_t kAlign = 4096;  // page alignment: no false sharing, friendly to SIMD and DMA
}

ncclResult_t Memory::init(ncclComm_t comm) {
  ncclResult_t res = chorusCommGetMode(comm, &mode_);
  if (res != ncclSuccess) return res;
  if (mode_ != chorusModeHost) {
    std::fprintf(stderr,
                 "chorus benchmarks: GPU-mode communicators are not supported yet; "
                 "run with CHORUS_MODE=host\n");
    return ncclInvalidUsage;
  }
  stream_ = nullptr;
  return ncclSuccess;
}

Memory::~Memory() = default;

const char* Memory::describe() const { return mode_ == chorusModeHost ? "host memory" : "device memory"; }

ncclResult_t Memory::alloc(size_t bytes, void** out) {
  // aligned_alloc wants a multiple of the alignment; never ask for 0 bytes
  // so that zero-size rows still get distinct, valid pointers.
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded ? rounded : kAlign);
  if (!p) {
    std::fprintf(stderr, "chorus benchmarks: cannot allocate %zu bytes of host memory\n", bytes);
    return ncclSystemError;
  }
  // Touch every page now so first-use page faults do not land in the timing.
  std::memset(p, 0, rounded ? rounded : kAlign);
  *out = p;
  return ncclSuccess;
}

void Memory::release(void* buf) { std::free(buf); }

void* Memory::beginView(void* buf, size_t, bool) { return buf; }

void Memory::endView(void*, void*, size_t, bool) {}

ncclResult_t Memory::sync() { return ncclSuccess; }

}  // namespace chorus_bench
