// Helpers shared by every Store implementation.
#include "bootstrap/store.h"

#include "core/result.h"

namespace chorus {

ncclResult_t failStoreWait(bool aborted, Clock::time_point started, const std::string& firstMissing, size_t missing,
                           size_t total, const std::string& where) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  if (aborted)  // asked for (abort, or the caller's stop condition): not a failure of the store
    return failQuiet(ncclRemoteError, kLogBootstrap,
                     "bootstrap: aborted after %lld ms waiting for key '%s' (%zu of %zu keys missing) in %s",
                     static_cast<long long>(ms), firstMissing.c_str(), missing, total, where.c_str());
  return fail(ncclRemoteError,
              "bootstrap: timed out after %lld ms waiting for key '%s' (%zu of %zu keys missing) in %s",
              static_cast<long long>(ms), firstMissing.c_str(), missing, total, where.c_str());
}

std::vector<uint8_t> encodeCounter(int64_t v) {
  std::vector<uint8_t> out(8);
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(u >> (8 * i));
  return out;
}

bool decodeCounter(const std::vector<uint8_t>& bytes, int64_t* v) {
  if (bytes.size() != 8) return false;
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  *v = static_cast<int64_t>(u);
  return true;
}

}  // namespace chorus
