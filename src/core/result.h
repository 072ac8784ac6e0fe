// Status propagation helpers. Every internal function that can fail returns
// ncclResult_t; CHORUS_CHECK forwards a failure to the caller and leaves a
// breadcrumb in the log so a failure deep in a transport can be traced back up
// to the API call that triggered it.
#pragma once

#include <string>

#include "core/log.h"
#include "nccl.h"

namespace chorus {

// Records `msg` as the calling thread's last error (and the comm's, if any),
// logs it at WARN, and returns `code`. Used at the point where a failure is
// first detected; callers above just propagate with CHORUS_CHECK.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Like fail() but logs at INFO: for conditions that are errors to the caller
// yet expected in normal operation (e.g. a network peer's orderly close).
ncclResult_t failQuiet(ncclResult_t code, uint32_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// The message most recently recorded by fail() on this thread ("" if none).
const char* lastErrorMessage();
void clearLastError();
// Puts back a message saved from lastErrorMessage() (for probes whose failure is expected).
void restoreLastError(const std::string& saved);

}  // namespace chorus

#define CHORUS_CHECK(expr)                                             \
  do {                                                                 \
    ncclResult_t chorus_res_ = (expr);                                 \
    if (chorus_res_ != ncclSuccess && chorus_res_ != ncclInProgress) { \
      CHORUS_TRACE_FAILURE(#expr, chorus_res_);                        \
      return chorus_res_;                                              \
    }                                                                  \
  } while (0)

// For system calls: on failure records errno text with `what`.
#define CHORUS_SYSCHECK(call, what)                                                                 \
  do {                                                                                              \
    if ((call) < 0) return ::chorus::fail(ncclSystemError, "%s failed: %s", what, strerror(errno)); \
  } while (0)
