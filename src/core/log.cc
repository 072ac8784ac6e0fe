#include "core/log.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "core/params.h"

namespace chorus {
namespace {

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit},   {"COLL", kLogColl},           {"P2P", kLogP2P},     {"SHM", kLogShm},
    {"NET", kLogNet},     {"GRAPH", kLogGraph},         {"TUNING", kLogTune}, {"ENV", kLogEnv},
    {"ALLOC", kLogAlloc}, {"BOOTSTRAP", kLogBootstrap}, {"PROXY", kLogProxy}, {"ALL", kLogAll},
};

// Logger configuration, parsed once from the environment (again after logReset).
struct LoggerState {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  std::atomic<int> level{static_cast<int>(LogLevel::Warn)};
  std::atomic<uint32_t> subsys{kLogInit | kLogEnv};
  FILE* out = stderr;
  char host[64] = {0};
};

// The logger's mutex must not be held by another thread across fork(), or
// the child would deadlock at its first log line: take it around fork.
void lockForFork();
void unlockAfterFork();

LoggerState& state() {
  static LoggerState* s = [] {
    auto* st = new LoggerState();
    pthread_atfork(lockForFork, unlockAfterFork, unlockAfterFork);
    return st;
  }();
  return *s;
}

void lockForFork() { state().mutex.lock(); }
void unlockAfterFork() { state().mutex.unlock(); }

LogLevel parseLevel(const std::string& s) {
  if (s == "VERSION") return LogLevel::Version;
  if (s == "WARN") return LogLevel::Warn;
  if (s == "INFO") return LogLevel::Info;
  if (s == "TRACE") return LogLevel::Trace;
  if (s == "ABORT" || s == "NONE") return LogLevel::None;
  return LogLevel::Warn;
}

uint32_t parseSubsys(const std::string& spec) {
  bool invert = !spec.empty() && spec[0] == '^';
  uint32_t mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& e : kSubsysNames)
      if (strcasecmp(tok.c_str(), e.name) == 0) mask |= e.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

FILE* openLogFile(const std::string& pattern) {
  if (pattern.empty()) return stderr;
  const std::string path = expandPathPattern(pattern);
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return stderr;
  setvbuf(f, nullptr, _IOLBF, 0);
  return f;
}

void initLocked(LoggerState& s) {
  gethostname(s.host, sizeof(s.host) - 1);
  s.level = static_cast<int>(parseLevel(params::debugLevel()));
  s.subsys = parseSubsys(params::debugSubsys());
  if (s.out != stderr) fclose(s.out);
  s.out = openLogFile(params::debugFile());
  s.ready = true;
}

void ensureInit() {
  LoggerState& s = state();
  if (s.ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.ready) initLocked(s);
}

const char* levelTag(LogLevel l) {
  switch (l) {
    case LogLevel::Warn:
      return "WARN";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Trace:
      return "TRACE";
    default:
      return "";
  }
}

}  // namespace

std::string expandPathPattern(const std::string& pattern) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 'h')
        path += host;
      else if (c == 'p')
        path += std::to_string(getpid());
      else
        path += c;
    } else {
      path += pattern[i];
    }
  }
  return path;
}

bool logEnabled(LogLevel level, uint32_t subsys) {
  ensureInit();
  LoggerState& s = state();
  if (static_cast<int>(level) > s.level.load(std::memory_order_relaxed)) return false;
  // Warnings are shown whatever the subsystem filter says.
  return level <= LogLevel::Warn || (s.subsys.load(std::memory_order_relaxed) & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t /*subsys*/, const char* file, int line, const char* fmt, ...) {
  LoggerState& s = state();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  auto tid = static_cast<long>(syscall(SYS_gettid));
  std::lock_guard<std::mutex> lock(s.mutex);
  if (level == LogLevel::Trace)
    fprintf(s.out, "%s:%d:%ld [chorus] %s %s:%d %s\n", s.host, getpid(), tid, levelTag(level), base, line, msg);
  else
    fprintf(s.out, "%s:%d:%ld [chorus] %s %s\n", s.host, getpid(), tid, levelTag(level), msg);
}

void logReset() {
  LoggerState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  initLocked(s);
}

}  // namespace chorus
