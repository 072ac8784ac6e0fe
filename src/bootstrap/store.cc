// Helpers shared by every Store implementation.
#include "bootstrap/store.h"

#include "core/little_endian.h"
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
  storeLittleEndian(out.data(), static_cast<uint64_t>(v), 8);
  return out;
}

bool decodeCounter(const std::vector<uint8_t>& bytes, int64_t* v) {
  if (bytes.size() != 8) return false;
  *v = static_cast<int64_t>(loadLittleEndian(bytes.data(), 8));
  return true;
}

}  // namespace chorus
