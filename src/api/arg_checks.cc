#include "api/arg_checks.h"

#include <algorithm>
#include <string>

#include "core/coll_types.h"
#include "core/result.h"

namespace chorus {

ncclResult_t checkDatatype(int t, const char* fn) {
  if (t < 0 || t >= ncclNumTypes)
    return fail(ncclInvalidArgument, "%s: invalid datatype %d (valid: 0..%d)", fn, t, ncclNumTypes - 1);
  return ncclSuccess;
}

ncclResult_t checkRoot(int root, int nranks, const char* fn, const char* what) {
  if (root < 0 || root >= nranks)
    return fail(ncclInvalidArgument, "%s: %s %d is out of range [0, %d)", fn, what, root, nranks);
  return ncclSuccess;
}

ncclResult_t checkPtr(const void* p, const char* fn, const char* what) {
  if (p == nullptr) return fail(ncclInvalidArgument, "%s: %s is NULL", fn, what);
  return ncclSuccess;
}

ncclResult_t checkBuffer(const void* p, size_t count, const char* fn, const char* what) {
  if (p == nullptr && count > 0) return fail(ncclInvalidArgument, "%s: %s is NULL but count is %zu", fn, what, count);
  return ncclSuccess;
}

ncclResult_t checkBufferBytes(size_t count, size_t blocks, int dtype, const char* fn, const char* what) {
  size_t elements = 0, bytes = 0;
  // dtype was validated by the caller; 0 (an unknown type) still counts as one byte.
  const size_t esz = std::max<size_t>(1, typeSize(static_cast<ncclDataType_t>(dtype)));
  const bool overflow =
      __builtin_mul_overflow(count, blocks, &elements) || __builtin_mul_overflow(elements, esz, &bytes);
  if (overflow || bytes > kMaxBufferBytes)
    return fail(ncclInvalidArgument,
                "%s: count %zu%s of %zu-byte elements makes %s larger than any buffer can be (limit 2^57 bytes)", fn,
                count, blocks > 1 ? (" x " + std::to_string(blocks) + " ranks").c_str() : "", esz, what);
  return ncclSuccess;
}

}  // namespace chorus
