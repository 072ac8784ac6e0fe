// Library-managed error-feedback residuals (CHORUS_WIRE_FEEDBACK=1,
// docs/wire.md): one zero-initialised float per element, keyed by the send
// buffer's address and element count, so a training loop that reduces the
// same gradient buffers every step gets the same residuals back. They live
// until the communicator is destroyed (or finalized and destroyed); a buffer
// that moves gets new residuals (the old ones stay until then). In GPU mode
// they are pinned host memory mapped for the kernels (read and written over
// the bus, once per element per call), which needs no stream operation and so
// is safe inside a CUDA graph capture.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/result.h"

namespace chorus {

class WireResiduals {
 public:
  // Makes a new array (`bytes` at `base`, kept alive by `owner`) reachable
  // by the executor on `device` and returns the address it uses (GPU mode:
  // pinned and mapped for the kernels, gpu::mapHostMemory; *keep holds the
  // mapping and the array). Host mode needs none.
  using Map = ncclResult_t (*)(int device, void* base, size_t bytes, std::shared_ptr<void> owner,
                               std::shared_ptr<void>* keep, void** address);

  // The residual array of (buffer, count), created zeroed on first use, in
  // *out (the executor's address of it; `map` and `device`: see Map).
  ncclResult_t residualFor(const void* buffer, size_t count, Map map, int device, float** out) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = residuals_[{buffer, count}];
    if (e.values == nullptr) {
      // Whole pages of their own: a mapping registers pages, and two arrays
      // sharing one could not both be registered.
      const size_t bytes = (count * sizeof(float) + kPage - 1) / kPage * kPage;
      e.values.reset(static_cast<float*>(std::aligned_alloc(kPage, bytes > 0 ? bytes : kPage)), FreeValues{});
      if (e.values == nullptr) {
        residuals_.erase({buffer, count});
        return fail(ncclSystemError, "error feedback: no memory for %zu residuals", count);
      }
      std::memset(e.values.get(), 0, bytes);
      e.count = count;
      e.address = e.values.get();
      if (map != nullptr) {
        void* address = nullptr;
        const ncclResult_t mapped = map(device, e.values.get(), bytes, e.values, &e.keep, &address);
        if (mapped != ncclSuccess) {
          residuals_.erase({buffer, count});
          return mapped;
        }
        e.address = static_cast<float*>(address);
      }
    }
    *out = e.address;
    return ncclSuccess;
  }
  // Bytes of residuals held (for the docs' memory statement and the tests).
  size_t bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t b = 0;
    for (const auto& [key, e] : residuals_) b += e.count * sizeof(float);
    return b;
  }

 private:
  static constexpr size_t kPage = 4096;
  struct FreeValues {
    void operator()(float* p) const { std::free(p); }
  };
  struct Entry {
    std::shared_ptr<float> values;  // also held by keep, which frees them after the unmapping
    size_t count = 0;
    std::shared_ptr<void> keep;
    float* address = nullptr;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<const void*, size_t>, Entry> residuals_;
};

}  // namespace chorus
