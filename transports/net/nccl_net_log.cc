// Log lines from NCCL net plugins, routed into Chorus's logger.
#include <cstdio>

#include "core/log.h"
#include "transports/net/nccl_net_driver.h"

namespace chorus {

uint32_t chorusSubsysFromNccl(unsigned long flags) {
  struct Bit {
    unsigned long nccl;
    uint32_t ours;
  };
  static constexpr Bit kMap[] = {
      {NCCL_INIT, kLogInit},
      {NCCL_COLL, kLogColl},
      {NCCL_P2P, kLogP2P},
      {NCCL_SHM, kLogShm},
      {NCCL_NET, kLogNet},
      {NCCL_GRAPH, kLogGraph},
      {NCCL_TUNING, kLogTune},
      {NCCL_ENV, kLogEnv},
      {NCCL_ALLOC, kLogAlloc},
      {NCCL_PROXY, kLogProxy},
      {NCCL_BOOTSTRAP, kLogBootstrap},
  };
  uint32_t out = 0;
  for (const Bit& b : kMap)
    if ((flags & b.nccl) != 0) out |= b.ours;
  return out != 0 ? out : kLogNet;  // bits Chorus has no subsystem for count as NET
}

void ncclNetPluginVlog(const char* who, ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                       const char* fmt, va_list ap) {
  LogLevel l = LogLevel::Trace;
  switch (level) {
    case NCCL_LOG_NONE:
      return;
    case NCCL_LOG_WARN:
    case NCCL_LOG_ABORT:
      l = LogLevel::Warn;
      break;
    case NCCL_LOG_VERSION:
    case NCCL_LOG_INFO:
      l = LogLevel::Info;
      break;
    default:
      break;
  }
  const uint32_t subsys = chorusSubsysFromNccl(flags);
  if (!logEnabled(l, subsys)) return;
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt != nullptr ? fmt : "", ap);
  logMessage(l, subsys, file != nullptr ? file : "net-plugin", line, "[%s] %s", who, msg);
}

}  // namespace chorus
