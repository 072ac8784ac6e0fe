// The one place that turns an exception escaping an entry point into a result
// code (see CHORUS_API_CATCH in export.h).
#include <exception>
#include <new>

#include "api/export.h"
#include "core/result.h"

namespace chorus {
namespace {

// fail() records the message before it logs; a logger that throws again
// (memory is short) still leaves the message and the code.
ncclResult_t report(ncclResult_t code, const char* fn, const char* what) noexcept {
  try {
    return fail(code, "%s: %s", fn, what);
  } catch (...) {
    return code;
  }
}

}  // namespace

ncclResult_t apiExceptionResult(const char* fn) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return report(ncclSystemError, fn, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return report(ncclInternalError, fn, e.what());
  } catch (...) {
    return report(ncclInternalError, fn, "an exception that is not a std::exception");
  }
}

}  // namespace chorus
