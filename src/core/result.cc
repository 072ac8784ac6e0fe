#include "core/result.h"

#include <cstdarg>
#include <cstdio>

namespace chorus {
namespace {
thread_local char tlsLastError[1024] = {0};
}

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsLastError, sizeof(tlsLastError), fmt, ap);
  va_end(ap);
  CHORUS_WARN(kLogAll, "%s", tlsLastError);
  return code;
}

ncclResult_t failQuiet(ncclResult_t code, uint32_t subsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsLastError, sizeof(tlsLastError), fmt, ap);
  va_end(ap);
  CHORUS_INFO(subsys, "%s", tlsLastError);
  return code;
}

const char* lastErrorMessage() { return tlsLastError; }
void clearLastError() { tlsLastError[0] = '\0'; }
void restoreLastError(const std::string& saved) { snprintf(tlsLastError, sizeof(tlsLastError), "%s", saved.c_str()); }

}  // namespace chorus
