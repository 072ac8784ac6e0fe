// An exception escaping an entry point becomes a result code (see
// CHORUS_API_CATCH in export.h); the conversion is core/exception_guard.h's,
// shared with the internal threads.
#include "api/export.h"
#include "core/exception_guard.h"

namespace chorus {

ncclResult_t apiExceptionResult(const char* fn) noexcept { return currentExceptionResult(fn); }

}  // namespace chorus
