#include "core/result.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace chorus {
namespace {
thread_local char tlsLastError[1024] = {0};

// Formats into a buffer of its own first: a message that quotes the last one
// (fail(code, "...: %s", lastErrorMessage())) reads tlsLastError while it is
// written, which vsnprintf does not allow.
void setLastError(const char* fmt, va_list ap) {
  char text[sizeof(tlsLastError)];
  vsnprintf(text, sizeof(text), fmt, ap);
  memcpy(tlsLastError, text, sizeof(text));
}
}  // namespace

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  setLastError(fmt, ap);
  va_end(ap);
  CHORUS_WARN(kLogAll, "%s", tlsLastError);
  return code;
}

ncclResult_t failQuiet(ncclResult_t code, uint32_t subsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  setLastError(fmt, ap);
  va_end(ap);
  CHORUS_INFO(subsys, "%s", tlsLastError);
  return code;
}

const char* lastErrorMessage() { return tlsLastError; }
void clearLastError() { tlsLastError[0] = '\0'; }
void restoreLastError(const std::string& saved) { snprintf(tlsLastError, sizeof(tlsLastError), "%s", saved.c_str()); }

}  // namespace chorus
