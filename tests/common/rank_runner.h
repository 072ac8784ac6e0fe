// Runs one test body on N ranks, either as threads of this process (the
// bootstrap then uses the in-process store of the id's creator) or as forked
// child processes (real TCP bootstrap, shared-memory transport).
//
// The body never uses gtest assertions directly: a forked child cannot report
// through gtest, so every rank records failures in its RankCtx and the runner
// turns them into gtest failures in the parent. The same body therefore runs
// unchanged in both modes.
#pragma once

#include <atomic>
#include <cstdarg>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "chorus/chorus.h"
#include "nccl.h"

namespace chorus::test {

// What one rank sees. `comm` is null when the runner was told not to create
// communicators (the body then inits from `id` itself).
struct RankCtx {
  int rank = 0;
  int nranks = 0;
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};

  // Records a failure (printf format). Thread-safe; the first kMaxMessages are kept.
  void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void vfail(const char* fmt, va_list ap);
  bool failed() const { return failures_.load() > 0; }
  int failureCount() const { return failures_.load(); }
  // Records a failure when res != expected; returns res == expected.
  bool expectResult(ncclResult_t res, ncclResult_t expected, const char* what);

  std::vector<std::string> messages() const;
  static constexpr int kMaxMessages = 20;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> messages_;
  std::atomic<int> failures_{0};
};

using RankFn = std::function<void(RankCtx&)>;

struct RunOptions {
  // Create the communicators (ncclCommInitRankConfig) before calling the body
  // and destroy them after. When false the body gets comm == nullptr.
  bool initComms = true;
  // Passed to ncclCommInitRankConfig when non-null (copied per rank).
  const ncclConfig_t* config = nullptr;
  // Hard bound on the whole run. Threads: the process aborts with a message
  // (a hung test is worse than a crashed one). Processes: stragglers are
  // SIGKILLed and reported.
  int timeoutMs = 120000;
  // Environment set before communicator creation. Processes: set in each child
  // only. Threads: set in this process for the run and restored afterwards.
  std::vector<std::pair<std::string, std::string>> env;
  // Processes only: runs in the parent once the children exist and have the
  // id (e.g. to start a thread that must not be running at fork time).
  std::function<void()> afterLaunch;
  // Processes only: runs in the parent with the id once it exists, before
  // any child has it (e.g. to hold the id's store open for the whole run).
  std::function<void(const ncclUniqueId&)> withId;
};

// Outcome of one rank of a forked run.
struct ProcessOutcome {
  bool exited = false;  // normal exit (then exitCode is valid)
  int exitCode = -1;
  int signal = 0;               // terminating signal, if any
  bool killedByRunner = false;  // still running at the deadline
  std::vector<std::string> messages;
  std::string describe() const;
};

// Runs `fn` on nranks threads. Failures become gtest failures (ADD_FAILURE).
void runThreads(int nranks, const RankFn& fn, const RunOptions& opts = {});

// Runs `fn` in nranks forked children and returns what happened to each.
std::vector<ProcessOutcome> runProcessesRaw(int nranks, const RankFn& fn, const RunOptions& opts = {});
// Same, and every rank must exit 0 without messages (else gtest failures).
void runProcesses(int nranks, const RankFn& fn, const RunOptions& opts = {});

// ncclCommInitAll(n) in this thread, then `fn` with all communicators (driven
// from this one thread, e.g. ncclGroupStart / per-rank calls / ncclGroupEnd).
// `ctx` records failures; rank is 0 and nranks is n.
void runInitAll(int nranks, const std::function<void(RankCtx& ctx, std::vector<ncclComm_t>& comms)>& fn);

// Forces host mode for communicators created by this process from now on.
void useHostMode();

// Sets environment variables for a scope and restores the old values.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int freeLocalPort();

}  // namespace chorus::test

// Records "<expr> returned <code>: <last error>" and evaluates to false when
// expr is not ncclSuccess.
#define RANK_OK(ctx, expr)                                                                         \
  ([&]() -> bool {                                                                                 \
    ncclResult_t rank_ok_res_ = (expr);                                                            \
    if (rank_ok_res_ == ncclSuccess) return true;                                                  \
    (ctx).fail("rank %d: %s returned %s: %s", (ctx).rank, #expr, ncclGetErrorString(rank_ok_res_), \
               ncclGetLastError(nullptr));                                                         \
    return false;                                                                                  \
  }())
