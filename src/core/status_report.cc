#include "core/status_report.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <sys/types.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/comm.h"
#include "core/log.h"
#include "core/params.h"

namespace chorus {
namespace {

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

int64_t unixNowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string callJson(const OpActivity::Snapshot& s, int64_t nowMs) {
  const OpPrint& c = s.call;
  const auto type = static_cast<CollType>(c.coll);
  std::string j = "{\"call\": " + jsonString(describeCall(c));
  j += ", \"collective\": \"" + std::string(collName(type)) + "\"";
  j += ", \"count\": " + std::to_string(c.count) + ", \"datatype\": \"" + dtypeName(c.dtype) + "\"";
  if (c.op != kNoRedOp) j += ", \"op\": \"" + std::string(reduceKindName(static_cast<ReduceKind>(c.op))) + "\"";
  if (c.root != kNoRoot) j += ", \"root\": " + std::to_string(c.root);
  j += ", \"tasksInGroup\": " + std::to_string(s.ntasks);
  // Collectives are numbered per communicator, sends and receives per peer (core/op_fingerprint.h).
  j += std::string(isSendOrRecv(type) ? ", \"p2pNumber\": " : ", \"opNumber\": ") + std::to_string(c.seq);
  if (s.waitingSinceUnixMs > 0) {
    j += ", \"noProgressForMs\": " + std::to_string(nowMs - s.waitingSinceUnixMs);
    j += ", \"waitsOn\": {\"peer\": " + std::to_string(s.waitedPeer) + ", \"direction\": \"" +
         (s.waitedReceiving ? "receiving" : "sending") + "\"}";
  }
  return j + "}";
}

std::string commJson(const ncclComm& c, int64_t nowMs) {
  const OpActivity::Snapshot s = c.activity.snapshot();
  char hash[32];
  snprintf(hash, sizeof(hash), "0x%016llx", static_cast<unsigned long long>(c.id.commHash));
  std::string j = "{\"commHash\": \"" + std::string(hash) + "\", \"rank\": " + std::to_string(c.id.rank) +
                  ", \"nranks\": " + std::to_string(c.id.nranks) + ", \"mode\": \"" + (c.id.hostMode ? "host" : "gpu") +
                  "\"";
  if (!c.config.commName.empty()) j += ", \"name\": " + jsonString(c.config.commName);
  j += ", \"collectivesStarted\": " + std::to_string(s.collStarted) +
       ", \"collectivesCompleted\": " + std::to_string(s.collDone) +
       ", \"p2pStarted\": " + std::to_string(s.p2pStarted) + ", \"p2pCompleted\": " + std::to_string(s.p2pDone);
  j += ", \"error\": " + std::string(c.asyncError.load() == ncclSuccess ? "null" : std::to_string(c.asyncError.load()));
  j += ", \"inFlight\": [";
  if (s.inCall) j += callJson(s, nowMs);
  return j + "]}";
}

int gSignalPipe[2] = {-1, -1};  // [1] is what the handler writes to

void onStatusSignal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = write(gSignalPipe[1], &byte, 1);
  errno = saved;
}

void writeOnSignal() {
  const std::string report = statusReportJson();
  const std::string file = params::statusFile();
  if (file.empty())
    CHORUS_WARN(kLogAll, "status report (SIGUSR1): %s", report.c_str());
  else
    writeStatusReportIfConfigured();
}

void serveSignals(int readEnd) {
  for (;;) {
    char byte = 0;
    const ssize_t n = read(readEnd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    try {
      writeOnSignal();
    } catch (...) {
      CHORUS_WARN(kLogAll, "status report: could not be written (out of memory?)");
    }
  }
}

}  // namespace

std::string statusReportJson() {
  const int64_t now = unixNowMs();
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string j = "{\"pid\": " + std::to_string(getpid()) + ", \"host\": " + jsonString(host) +
                  ", \"unixTimeMs\": " + std::to_string(now) + ", \"communicators\": [";
  bool first = true;
  CommRegistry::instance().forEach([&](const ncclComm& c) {
    j += (first ? "" : ", ") + commJson(c, now);
    first = false;
  });
  return j + "]}\n";
}

void writeStatusReportIfConfigured() {
  static const std::string pattern = params::statusFile();
  if (pattern.empty()) return;
  const std::string path = expandPathPattern(pattern);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    CHORUS_WARN(kLogAll, "status report: cannot write %s: %s", tmp.c_str(), strerror(errno));
    return;
  }
  const std::string report = statusReportJson();
  const bool ok = fwrite(report.data(), 1, report.size(), f) == report.size();
  if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
    CHORUS_WARN(kLogAll, "status report: writing %s failed: %s", path.c_str(), strerror(errno));
    unlink(tmp.c_str());
  }
}

void installStatusSignal() {
  // Per process: a child forked after a parent's init inherits the handler
  // and the pipe but not the thread that serves them, so it starts its own.
  static std::mutex mu;
  static pid_t servedBy = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (servedBy == getpid() || params::statusSignal() == 0) return;
  struct sigaction current {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) != 0) return;
  const bool ours = servedBy != 0 && current.sa_handler == onStatusSignal;
  if (current.sa_handler != SIG_DFL && !ours) return;  // the program handles (or ignores) SIGUSR1 itself
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  try {
    std::thread(serveSignals, fds[0]).detach();
  } catch (...) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (ours) close(gSignalPipe[1]);  // the parent's pipe, which nobody reads here
  gSignalPipe[1] = fds[1];
  servedBy = getpid();
  struct sigaction sa {};
  sa.sa_handler = onStatusSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

}  // namespace chorus
