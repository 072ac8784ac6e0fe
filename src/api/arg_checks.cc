#include "api/arg_checks.h"

#include <string>

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

namespace {

size_t datatypeBytes(int t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;  // ncclInt64, ncclUint64, ncclFloat64
  }
}

}  // namespace

ncclResult_t checkBufferBytes(size_t count, size_t blocks, int dtype, const char* fn, const char* what) {
  size_t elements = 0, bytes = 0;
  const bool overflow = __builtin_mul_overflow(count, blocks, &elements) ||
                        __builtin_mul_overflow(elements, datatypeBytes(dtype), &bytes);
  if (overflow || bytes > kMaxBufferBytes)
    return fail(ncclInvalidArgument,
                "%s: count %zu%s of %zu-byte elements makes %s larger than any buffer can be (limit 2^57 bytes)", fn,
                count, blocks > 1 ? (" x " + std::to_string(blocks) + " ranks").c_str() : "", datatypeBytes(dtype),
                what);
  return ncclSuccess;
}

}  // namespace chorus
