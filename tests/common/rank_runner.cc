#include "common/rank_runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace chorus::test {
namespace {

using Clock = std::chrono::steady_clock;

// Rank body wrapper shared by both modes: init, run, tear down.
void runRank(RankCtx& ctx, const RankFn& fn, const RunOptions& opts, bool finalizeBeforeDestroy,
             std::barrier<>* beforeDestroy) {
  if (opts.initComms) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (opts.config) config = *opts.config;
    ncclComm_t comm = nullptr;
    ncclResult_t res = ncclCommInitRankConfig(&comm, ctx.nranks, ctx.id, ctx.rank, &config);
    if (res == ncclInProgress) {
      // Non-blocking config: wait for the background init to finish.
      ncclResult_t async = ncclInProgress;
      while (async == ncclInProgress && ncclCommGetAsyncError(comm, &async) == ncclSuccess)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      res = async;
    }
    if (res != ncclSuccess) {
      ctx.fail("rank %d: ncclCommInitRankConfig returned %s: %s", ctx.rank, ncclGetErrorString(res),
               ncclGetLastError(nullptr));
      if (beforeDestroy) beforeDestroy->arrive_and_drop();
      return;
    }
    ctx.comm = comm;
  }
  fn(ctx);
  if (opts.initComms && ctx.comm != nullptr) {
    // No rank frees its connectors while a peer may still be reading them.
    if (beforeDestroy) beforeDestroy->arrive_and_wait();
    if (finalizeBeforeDestroy) {
      ncclResult_t res = ncclCommFinalize(ctx.comm);
      if (res != ncclSuccess)
        ctx.fail("rank %d: ncclCommFinalize returned %s: %s", ctx.rank, ncclGetErrorString(res),
                 ncclGetLastError(nullptr));
    }
    ncclResult_t res = ncclCommDestroy(ctx.comm);
    if (res != ncclSuccess)
      ctx.fail("rank %d: ncclCommDestroy returned %s: %s", ctx.rank, ncclGetErrorString(res),
               ncclGetLastError(nullptr));
    ctx.comm = nullptr;
  } else if (beforeDestroy) {
    beforeDestroy->arrive_and_drop();
  }
}

ncclUniqueId makeId() {
  ncclUniqueId id{};
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess)
    ADD_FAILURE() << "ncclGetUniqueId returned " << ncclGetErrorString(res) << ": " << ncclGetLastError(nullptr);
  return id;
}

// Aborts the process if the threads of a run do not finish in time.
class Watchdog {
 public:
  explicit Watchdog(int timeoutMs) : thread_([this, timeoutMs] { watch(timeoutMs); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void watch(int timeoutMs) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeoutMs), [this] { return done_; })) {
      std::fprintf(stderr, "rank_runner: ranks still running after %d ms; aborting the test process\n", timeoutMs);
      std::fflush(stderr);
      std::abort();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Child side of a forked rank: never returns.
[[noreturn]] void childMain(int rank, int nranks, const ncclUniqueId& id, int fd, const RankFn& fn,
                            const RunOptions& opts) {
  for (const auto& [k, v] : opts.env) setenv(k.c_str(), v.c_str(), 1);
  RankCtx ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.id = id;
  runRank(ctx, fn, opts, /*finalizeBeforeDestroy=*/true, nullptr);
  std::string out;
  for (const std::string& m : ctx.messages()) out += m + "\n";
  writeAll(fd, out);
  close(fd);
  // _exit: skip gtest's and the parent's atexit handlers and stdio buffers.
  _exit(ctx.failed() ? 1 : 0);
}

bool readAll(int fd, void* dst, size_t bytes) {
  auto* p = static_cast<char*>(dst);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = read(fd, p + got, bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

void drain(int fd, std::string* into) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // EOF or EAGAIN
  }
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    if (nl > pos) lines.push_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

}  // namespace

void RankCtx::fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(fmt, ap);
  va_end(ap);
}

void RankCtx::vfail(const char* fmt, va_list ap) {
  char buf[2048];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  const int n = failures_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  if (n < kMaxMessages)
    messages_.emplace_back(buf);
  else if (n == kMaxMessages)
    messages_.emplace_back("(further failures omitted)");
}

bool RankCtx::expectResult(ncclResult_t res, ncclResult_t expected, const char* what) {
  if (res == expected) return true;
  fail("rank %d: %s returned %s, expected %s (last error: %s)", rank, what, ncclGetErrorString(res),
       ncclGetErrorString(expected), ncclGetLastError(nullptr));
  return false;
}

std::vector<std::string> RankCtx::messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}

std::string ProcessOutcome::describe() const {
  std::string s;
  if (killedByRunner)
    s = "still running at the deadline (killed)";
  else if (exited)
    s = "exit code " + std::to_string(exitCode);
  else
    s = "killed by signal " + std::to_string(signal);
  for (const std::string& m : messages) s += "\n    " + m;
  return s;
}

void useHostMode() { chorusSetDefaultMode(chorusModeHost); }

void runThreads(int nranks, const RankFn& fn, const RunOptions& opts) {
  useHostMode();
  ScopedEnv env(opts.env);
  const ncclUniqueId id = makeId();
  std::vector<RankCtx> ctxs(static_cast<size_t>(nranks));
  std::barrier<> beforeDestroy(nranks);
  {
    Watchdog dog(opts.timeoutMs);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; ++r) {
      RankCtx& c = ctxs[static_cast<size_t>(r)];
      c.rank = r;
      c.nranks = nranks;
      c.id = id;
      threads.emplace_back([&c, &fn, &opts, &beforeDestroy] { runRank(c, fn, opts, false, &beforeDestroy); });
    }
    for (auto& t : threads) t.join();
  }
  for (const RankCtx& c : ctxs)
    for (const std::string& m : c.messages()) ADD_FAILURE() << "[rank " << c.rank << "] " << m;
}

std::vector<ProcessOutcome> runProcessesRaw(int nranks, const RankFn& fn, const RunOptions& opts) {
  useHostMode();
  signal(SIGPIPE, SIG_IGN);  // a child that died early must not kill the test through its id pipe
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(static_cast<size_t>(nranks), -1);
  std::vector<int> fds(static_cast<size_t>(nranks), -1);    // messages, child -> parent
  std::vector<int> idFds(static_cast<size_t>(nranks), -1);  // the unique id, parent -> child
  std::vector<std::string> text(static_cast<size_t>(nranks));
  std::vector<ProcessOutcome> out(static_cast<size_t>(nranks));
  // Fork before creating the id: ncclGetUniqueId starts the store server
  // thread, and forking a process with running threads can leave a child
  // stuck on a lock one of them held (ASan's allocator does exactly that).
  for (int r = 0; r < nranks; ++r) {
    int msg[2], idp[2];
    if (pipe(msg) != 0 || pipe(idp) != 0) {
      ADD_FAILURE() << "pipe: " << strerror(errno);
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(msg[0]);
      close(idp[1]);
      for (int q = 0; q < r; ++q) {
        close(fds[static_cast<size_t>(q)]);
        close(idFds[static_cast<size_t>(q)]);
      }
      ncclUniqueId id;
      if (!readAll(idp[0], &id, sizeof(id))) _exit(97);  // the parent could not make an id
      close(idp[0]);
      childMain(r, nranks, id, msg[1], fn, opts);
    }
    close(msg[1]);
    close(idp[0]);
    if (pid < 0) {
      close(msg[0]);
      close(idp[1]);
      ADD_FAILURE() << "fork: " << strerror(errno);
      break;
    }
    fcntl(msg[0], F_SETFL, fcntl(msg[0], F_GETFL) | O_NONBLOCK);
    pids[static_cast<size_t>(r)] = pid;
    fds[static_cast<size_t>(r)] = msg[0];
    idFds[static_cast<size_t>(r)] = idp[1];
  }
  const ncclUniqueId id = makeId();
  if (opts.withId) opts.withId(id);
  const std::string idBytes(reinterpret_cast<const char*>(&id), sizeof(id));
  for (int& fd : idFds) {
    if (fd < 0) continue;
    if (!::testing::Test::HasFailure()) writeAll(fd, idBytes);
    close(fd);
  }
  if (opts.afterLaunch) opts.afterLaunch();
  const auto deadline = Clock::now() + std::chrono::milliseconds(opts.timeoutMs);
  int running = 0;
  for (pid_t pid : pids) running += pid > 0;
  while (running > 0) {
    for (int r = 0; r < nranks; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (fds[i] >= 0) drain(fds[i], &text[i]);
      if (pids[i] <= 0) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      out[i].exited = WIFEXITED(status);
      out[i].exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      out[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      pids[i] = -1;
      --running;
    }
    if (running > 0 && Clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        const size_t i = static_cast<size_t>(r);
        if (pids[i] <= 0) continue;
        kill(pids[i], SIGKILL);
        int status = 0;
        waitpid(pids[i], &status, 0);
        out[i].killedByRunner = true;
        out[i].signal = SIGKILL;
        pids[i] = -1;
      }
      running = 0;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (int r = 0; r < nranks; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (fds[i] < 0) continue;
    drain(fds[i], &text[i]);
    close(fds[i]);
    out[i].messages = splitLines(text[i]);
  }
  return out;
}

void runProcesses(int nranks, const RankFn& fn, const RunOptions& opts) {
  std::vector<ProcessOutcome> out = runProcessesRaw(nranks, fn, opts);
  for (size_t r = 0; r < out.size(); ++r) {
    const ProcessOutcome& o = out[r];
    if (o.exited && o.exitCode == 0 && o.messages.empty()) continue;
    ADD_FAILURE() << "[process rank " << r << "] " << o.describe();
  }
}

void runInitAll(int nranks, const std::function<void(RankCtx& ctx, std::vector<ncclComm_t>& comms)>& fn) {
  useHostMode();
  RankCtx ctx;
  ctx.nranks = nranks;
  std::vector<ncclComm_t> comms(static_cast<size_t>(nranks), nullptr);
  if (RANK_OK(ctx, ncclCommInitAll(comms.data(), nranks, nullptr))) {
    fn(ctx, comms);
    for (ncclComm_t c : comms) RANK_OK(ctx, ncclCommDestroy(c));
  }
  for (const std::string& m : ctx.messages()) ADD_FAILURE() << "[InitAll] " << m;
}

ScopedEnv::ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [k, v] : vars) {
    const char* old = std::getenv(k.c_str());
    saved_.push_back({k, {old != nullptr, old ? std::string(old) : std::string()}});
    setenv(k.c_str(), v.c_str(), 1);
  }
}

ScopedEnv::~ScopedEnv() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second.first)
      setenv(it->first.c_str(), it->second.second.c_str(), 1);
    else
      unsetenv(it->first.c_str());
  }
}

int freeLocalPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

}  // namespace chorus::test
