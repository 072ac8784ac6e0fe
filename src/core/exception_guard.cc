#include "core/exception_guard.h"

#include <exception>
#include <new>

#include "core/result.h"

namespace chorus {
namespace {

// fail() records the message before it logs; a logger that throws again
// (memory is short) still leaves the message and the code.
ncclResult_t report(ncclResult_t code, const char* where, const char* what) noexcept {
  try {
    return fail(code, "%s: %s", where, what);
  } catch (...) {
    return code;
  }
}

}  // namespace

ncclResult_t currentExceptionResult(const char* where) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return report(ncclSystemError, where, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return report(ncclInternalError, where, e.what());
  } catch (...) {
    return report(ncclInternalError, where, "an exception that is not a std::exception");
  }
}

}  // namespace chorus
