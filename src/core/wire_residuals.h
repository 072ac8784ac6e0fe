// Library-managed error-feedback residuals (CHORUS_WIRE_FEEDBACK=1,
// docs/wire.md): one zero-initialised float per element, keyed by the send
// buffer's address and element count, so a training loop that reduces the
// same gradient buffers every step gets the same residuals back. They live
// until the communicator is destroyed (or finalized and destroyed); a buffer
// that moves gets new residuals (the old ones stay until then).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace chorus {

class WireResiduals {
 public:
  // The residual array of (buffer, count), created zeroed on first use.
  float* residualFor(const void* buffer, size_t count) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<float>& r = residuals_[{buffer, count}];
    if (r.size() != count) r.assign(count, 0.0f);
    return r.data();
  }
  // Bytes held (for the docs' memory statement and the tests).
  size_t bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t b = 0;
    for (const auto& [key, r] : residuals_) b += r.size() * sizeof(float);
    return b;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<const void*, size_t>, std::vector<float>> residuals_;
};

}  // namespace chorus
