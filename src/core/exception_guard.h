// No exception leaves the library: not through an exported function
// (CHORUS_API_CATCH, src/api/export.h) and not out of an internal thread,
// where it would reach std::terminate and abort the application. Both end
// here: std::bad_alloc becomes ncclSystemError "out of memory", any other
// exception ncclInternalError, each with a message naming where it was
// caught (recorded for ncclGetLastError and logged as a WARN).
//
// Internal threads (docs/reliability.md lists them) run their bodies through
// guardedCall / guardedRun and then record the result where their owner
// looks: a communicator's async error, a link's health, a connection's error.
#pragma once

#include "nccl.h"

namespace chorus {

// Call only inside a catch handler: the result for the exception in flight.
ncclResult_t currentExceptionResult(const char* where) noexcept;

// body() -> ncclResult_t, or the exception it threw as a result.
template <class F>
ncclResult_t guardedCall(const char* where, F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return currentExceptionResult(where);
  }
}

// body() -> void; an exception is logged, and its result returned.
template <class F>
ncclResult_t guardedRun(const char* where, F&& body) noexcept {
  try {
    body();
    return ncclSuccess;
  } catch (...) {
    return currentExceptionResult(where);
  }
}

}  // namespace chorus
