#include "api/arg_checks.h"

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
  if (p == nullptr && count > 0)
    return fail(ncclInvalidArgument, "%s: %s is NULL but count is %zu", fn, what, count);
  return ncclSuccess;
}

}  // namespace chorus
