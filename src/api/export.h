// How a C entry point leaves the library. The objects are compiled with hidden
// visibility, so only functions marked here (and matched by exports.map) are
// exported. Every ncclX also gets its profiling twin pncclX, which NCCL
// exports so that tools can interpose on ncclX and still reach the real call.
#pragma once

#include "nccl.h"

#define CHORUS_EXPORT extern "C" __attribute__((visibility("default")))

// Declares pnccl<name> as an alias of nccl<name> (must follow the definition in the same TU).
#define CHORUS_EXPORT_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), alias(#name))) decltype(name) p##name;

// No exception leaves an exported function: each body returning ncclResult_t
// is a function-try-block closed by CHORUS_API_CATCH, so that
//   CHORUS_EXPORT ncclResult_t ncclX(...) try { ... } CHORUS_API_CATCH
// turns std::bad_alloc into ncclSystemError and anything else into
// ncclInternalError, with a message naming the function (api_guard.cc).
namespace chorus {
ncclResult_t apiExceptionResult(const char* fn) noexcept;  // call only inside a catch handler
}  // namespace chorus
#define CHORUS_API_CATCH                           \
  catch (...) {                                    \
    return ::chorus::apiExceptionResult(__func__); \
  }
