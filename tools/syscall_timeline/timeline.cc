// An LD_PRELOAD recorder of the calls that shape a small message's latency:
// sendmsg, send, recv, sched_yield and the ncclAllReduce entry and return,
// with CLOCK_MONOTONIC timestamps, kept in memory and written at exit to
// $CHORUS_TIMELINE_DIR/timeline.<pid> (one line per call: start ns, end ns,
// thread id, call, descriptor, result). Merging the files of both ranks
// (show.py) gives one time line of an exchange: which system calls sit on
// the critical path and how long each takes. Recording costs about 50 ns
// per call; nothing is recorded unless CHORUS_TIMELINE_DIR is set.
//
//   LD_PRELOAD=build/lib/libchorus_timeline.so CHORUS_TIMELINE_DIR=/tmp/tl <command>
#include <dlfcn.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nccl.h"

namespace {

enum Call : int { kSendmsg = 1, kRecv = 2, kSend = 3, kYield = 4, kAllReduceIn = 5, kAllReduceOut = 6 };

struct Event {
  long long startNs, endNs;
  int tid, call, fd;
  long result;
};

constexpr size_t kMaxEvents = size_t(1) << 22;
Event* g_events = nullptr;
std::atomic<size_t> g_count{0};

long long nowNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

void record(Call call, int fd, long result, long long startNs) {
  if (g_events == nullptr) return;
  const size_t i = g_count.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxEvents) return;
  g_events[i] = Event{startNs, nowNs(), static_cast<int>(syscall(SYS_gettid)), call, fd, result};
}

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

__attribute__((constructor)) void start() {
  if (std::getenv("CHORUS_TIMELINE_DIR") != nullptr) g_events = static_cast<Event*>(calloc(kMaxEvents, sizeof(Event)));
}

__attribute__((destructor)) void finish() {
  const char* dir = std::getenv("CHORUS_TIMELINE_DIR");
  if (g_events == nullptr || dir == nullptr) return;
  const std::string path = std::string(dir) + "/timeline." + std::to_string(getpid());
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return;
  const size_t n = std::min(g_count.load(), kMaxEvents);
  for (size_t i = 0; i < n; ++i) {
    const Event& e = g_events[i];
    fprintf(f, "%lld %lld %d %d %d %ld\n", e.startNs, e.endNs, e.tid, e.call, e.fd, e.result);
  }
  fclose(f);
}

}  // namespace

extern "C" {

ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  static auto real = next<ssize_t (*)(int, const msghdr*, int)>("sendmsg");
  const long long t = nowNs();
  const ssize_t r = real(fd, msg, flags);
  record(kSendmsg, fd, r, t);
  return r;
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
  static auto real = next<ssize_t (*)(int, const void*, size_t, int)>("send");
  const long long t = nowNs();
  const ssize_t r = real(fd, buf, n, flags);
  record(kSend, fd, r, t);
  return r;
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
  static auto real = next<ssize_t (*)(int, void*, size_t, int)>("recv");
  const long long t = nowNs();
  const ssize_t r = real(fd, buf, n, flags);
  record(kRecv, fd, r, t);
  return r;
}

int sched_yield() noexcept {
  static auto real = next<int (*)()>("sched_yield");
  const long long t = nowNs();
  const int r = real();
  record(kYield, -1, r, t);
  return r;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  static auto real =
      next<ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)>(
          "ncclAllReduce");
  record(kAllReduceIn, -1, 0, nowNs());
  const ncclResult_t r = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  record(kAllReduceOut, -1, r, nowNs());
  return r;
}

}  // extern "C"
