// The one logger. Honours NCCL_DEBUG (VERSION, WARN, INFO, TRACE), NCCL_DEBUG_SUBSYS
// (comma list of subsystems, ^ to exclude, ALL) and NCCL_DEBUG_FILE (%h host, %p pid).
#pragma once

#include <cstdint>
#include <string>

namespace chorus {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

// Subsystem bits; names match NCCL's NCCL_DEBUG_SUBSYS values where they exist.
enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogColl = 1u << 1,
  kLogP2P = 1u << 2,
  kLogShm = 1u << 3,
  kLogNet = 1u << 4,
  kLogGraph = 1u << 5,
  kLogTune = 1u << 6,
  kLogEnv = 1u << 7,
  kLogAlloc = 1u << 8,
  kLogBootstrap = 1u << 9,
  kLogProxy = 1u << 10,
  kLogAll = ~0u,
};

bool logEnabled(LogLevel level, uint32_t subsys);
void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// Re-reads the NCCL_DEBUG* variables (ncclResetDebugInit).
void logReset();
// A file name with %h replaced by the host name and %p by the pid (NCCL_DEBUG_FILE's rule).
std::string expandPathPattern(const std::string& pattern);

}  // namespace chorus

#define CHORUS_LOG_(lvl, sub, ...)                                                                       \
  do {                                                                                                   \
    if (::chorus::logEnabled(lvl, sub)) ::chorus::logMessage(lvl, sub, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define CHORUS_WARN(sub, ...) CHORUS_LOG_(::chorus::LogLevel::Warn, sub, __VA_ARGS__)
#define CHORUS_INFO(sub, ...) CHORUS_LOG_(::chorus::LogLevel::Info, sub, __VA_ARGS__)
#define CHORUS_TRACE(sub, ...) CHORUS_LOG_(::chorus::LogLevel::Trace, sub, __VA_ARGS__)
#define CHORUS_TRACE_FAILURE(expr, res) \
  CHORUS_LOG_(::chorus::LogLevel::Info, ::chorus::kLogAll, "%s -> error %d", expr, static_cast<int>(res))
