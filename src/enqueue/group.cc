#include "enqueue/group.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "core/exception_guard.h"
#include "core/log.h"
#include "core/peer_watch.h"
#include "core/result.h"
#include "enqueue/gpu_submit.h"
#include "enqueue/setup_note_watch.h"
#include "graph/comm_graph.h"
#include "host/executor.h"
#include "plan/plan_builder.h"
#include "plan/plan_cache.h"
#include "plan/setup_notes.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

// A communicator creation, split or finalize queued in a group.
struct QueuedInit {
  std::function<ncclResult_t()> run;
  const ncclComm* comm;  // the communicator it runs on
  bool finalize;         // it is that communicator's finalize
};

struct GroupState {
  int depth = 0;
  std::vector<Task> tasks;
  std::vector<QueuedInit> inits;
  ncclResult_t error = ncclSuccess;
  std::string message;  // the first error's, as it was when it happened
  void clear() {
    tasks.clear();
    inits.clear();
    error = ncclSuccess;
    message.clear();
  }
};
thread_local GroupState tlsGroup;

ncclResult_t runInits(std::vector<QueuedInit>& inits) {
  if (inits.size() == 1) return inits[0].run();
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  std::vector<std::string> messages(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] {
      results[i] = guardedCall("communicator init thread", inits[i].run);
      messages[i] = lastErrorMessage();
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < inits.size(); ++i)
    if (results[i] != ncclSuccess && results[i] != ncclInProgress) return fail(results[i], "%s", messages[i].c_str());
  return ncclSuccess;
}

// Groups the tasks by communicator, keeping each communicator's call order.
std::vector<std::vector<Task>> splitByComm(std::span<const Task> tasks) {
  std::vector<std::vector<Task>> groups;
  for (const Task& t : tasks) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g[0].comm == t.comm; });
    if (it == groups.end())
      groups.push_back({t});
    else
      it->push_back(t);
  }
  return groups;
}

// Holds a communicator's operation lock while it runs; the call recorded in
// its activity (recordCall) ends with it.
class CommGuard {
 public:
  explicit CommGuard(ncclComm* c) : comm_(c) { comm_->opMutex.lock(); }
  ~CommGuard() {
    comm_->activity.end();
    comm_->opMutex.unlock();
  }
  CommGuard(const CommGuard&) = delete;
  CommGuard& operator=(const CommGuard&) = delete;

 private:
  ncclComm* comm_;
};

// The call starts in the communicator's activity record (stall reports,
// status report) with the numbers stampPlan gave it.
void recordCall(const Plan& plan) {
  plan.comm->activity.begin(plan.stamps[0].mine, static_cast<int>(plan.tasks.size()), plan.collectives);
}

// The plan for one communicator's share of the group: from the cache when
// the same operations were run before, else freshly built (and cached);
// either way numbered as the communicator's next operations (stampPlan).
// Connectors are connected by the caller (connectPlan), so that a thread
// driving several communicators announces every receiver first.
ncclResult_t lookupOrBuild(std::span<const Task> tasks, Plan** out) {
  ncclComm* comm = tasks[0].comm;
  CHORUS_CHECK(commCheckUsable(comm, collName(tasks[0].type)));
  if (Plan* cached = comm->planCache->find(tasks, comm->registrations.epoch())) {
    *out = cached;
    stampPlan(*cached);
    recordCall(*cached);
    return ncclSuccess;
  }
  auto fresh = std::make_unique<Plan>();
  fresh->comm = comm;
  fresh->tasks.assign(tasks.begin(), tasks.end());
  PlanBuilder builder(comm, fresh.get());
  const ncclResult_t res = builder.build();
  if (res != ncclSuccess) {
    commSetError(comm, res, lastErrorMessage());
    return res;
  }
  *out = comm->planCache->insert(std::move(fresh));
  stampPlan(**out);
  recordCall(**out);
  return ncclSuccess;
}

// The ranks a plan that made connectors sends its setup note to: those it
// waits for in setup and (host mode) those it announced receivers to, which
// may wait for it without any connector towards it (gathers with different
// roots as a first call: docs/reliability.md, "First calls").
std::vector<int> notedPeers(ncclComm* comm) {
  std::vector<int> peers = comm->conns->pendingPeers();
  for (int p : comm->conns->takeAnnounced())
    if (comm->id.hostMode && std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
  return peers;
}

// Connects the plan's new connectors. `watch` is the plan's own; `others`
// those of the other plans this thread drives, polled while this one waits.
ncclResult_t connectPlan(Plan* plan, SetupNoteWatch& watch, std::span<SetupNoteWatch> others) {
  ncclComm* comm = plan->comm;
  // The common case: a repeated call allocates nothing.
  if (!comm->conns->hasPending() && !comm->conns->hasAnnounced()) return ncclSuccess;
  sendSetupNotes(*plan, notedPeers(comm));
  if (!comm->conns->hasPending()) return ncclSuccess;
  std::string gone;  // a dead peer ends the wait even without a time limit
  WaitBound bound = watchPeers(waitBoundLimit(comm->config.timeoutMs, &comm->abortFlag), comm, &gone);
  bound.stop = [peers = bound.stop, &watch, others, comm] {
    for (SetupNoteWatch& w : others) w.poll();  // a verdict they send ends this wait
    return comm->revoked.load(std::memory_order_relaxed) || watch.poll() || (peers && peers());
  };
  ncclResult_t res = explainPeerGone(comm->conns->connectAll(bound), comm, gone);
  if (res != ncclSuccess && watch.found()) res = watch.error();
  // Ended by this rank's own abort or revoke, not by a peer.
  if (res != ncclSuccess && commEndedByCaller(comm) != ncclSuccess) res = ncclInvalidUsage;
  if (res != ncclSuccess) {
    commSetError(comm, res, lastErrorMessage());
    return res;
  }
  if (!plan->sendsClassified) classifySends(*plan);  // now that every sender knows its peer
  return ncclSuccess;
}

// The plans' calls completed (GPU mode: were enqueued): the traffic counters' `ops`.
ncclResult_t countCompleted(ncclResult_t res, std::span<Plan* const> plans) {
  if (res == ncclSuccess)
    for (Plan* p : plans) p->comm->traffic.ops.add(p->tasks.size());
  return res;
}

// Common case: every task on one communicator; no allocation when cached.
ncclResult_t executeOnOneComm(std::span<const Task> tasks) {
  CommGuard guard(tasks[0].comm);
  Plan* plan = nullptr;
  CHORUS_CHECK(lookupOrBuild(tasks, &plan));
  SetupNoteWatch watch(*plan);
  CHORUS_CHECK(connectPlan(plan, watch, {}));
  const std::span<Plan* const> plans(&plan, 1);
  if (!tasks[0].comm->id.hostMode) {
    const std::vector<cudaStream_t> streams = streamsOf(tasks);
    return countCompleted(submitToGpu(plans, std::span<const std::vector<cudaStream_t>>(&streams, 1)), plans);
  }
  return countCompleted(runHostPlans(plans), plans);
}

// Connects every plan in turn; a plan whose watch found a mismatch while
// another one waited fails its communicator too.
ncclResult_t connectPlans(const std::vector<Plan*>& plans) {
  std::vector<SetupNoteWatch> watches;
  watches.reserve(plans.size());
  for (Plan* p : plans) watches.emplace_back(*p);
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < plans.size() && res == ncclSuccess; ++i) res = connectPlan(plans[i], watches[i], watches);
  std::string first = lastErrorMessage();
  for (size_t i = 0; i < plans.size(); ++i) {
    if (!watches[i].found() || plans[i]->comm->asyncError.load() != ncclSuccess) continue;
    const ncclResult_t code = watches[i].error();
    commSetError(plans[i]->comm, code, lastErrorMessage());
    // Every wait succeeded, yet a rank of this group mismatched: nothing runs.
    if (res == ncclSuccess) {
      res = code;
      first = lastErrorMessage();
    }
  }
  restoreLastError(first);  // the caller's error: the wait's, else the first mismatch
  return res;
}

// Several communicators driven by this thread. Every plan is built (and so
// every receiver announced) before any sender waits for its handle.
ncclResult_t executeOnManyComms(std::span<const Task> tasks) {
  auto groups = splitByComm(tasks);
  std::sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a[0].comm < b[0].comm; });
  std::vector<std::unique_ptr<CommGuard>> guards;
  for (auto& g : groups) guards.push_back(std::make_unique<CommGuard>(g[0].comm));
  std::vector<Plan*> plans;
  for (auto& g : groups) {
    Plan* plan = nullptr;
    CHORUS_CHECK(lookupOrBuild(g, &plan));
    plans.push_back(plan);
  }
  CHORUS_CHECK(connectPlans(plans));
  // GPU-mode ranks are enqueued first (that returns at once), then this
  // thread runs the host-mode ones.
  std::vector<Plan*> gpuPlans, hostPlans;
  std::vector<std::vector<cudaStream_t>> gpuStreams;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i]->comm->id.hostMode) {
      hostPlans.push_back(plans[i]);
      continue;
    }
    gpuPlans.push_back(plans[i]);
    gpuStreams.push_back(streamsOf(groups[i]));
  }
  if (!gpuPlans.empty()) CHORUS_CHECK(countCompleted(submitToGpu(gpuPlans, gpuStreams), gpuPlans));
  return hostPlans.empty() ? ncclSuccess : countCompleted(runHostPlans(hostPlans), hostPlans);
}

ncclResult_t executeTasks(std::span<const Task> tasks) {
  if (tasks.empty()) return ncclSuccess;
  for (const Task& t : tasks)
    if (t.comm != tasks[0].comm) return executeOnManyComms(tasks);
  return executeOnOneComm(tasks);
}

ncclResult_t goneFromGroup(const ncclComm* comm) {
  return fail(ncclInvalidUsage,
              "ncclGroupEnd: communicator %p was destroyed or aborted while this group held calls on it; the group "
              "runs nothing",
              static_cast<const void*>(comm));
}

}  // namespace

bool inGroup() { return tlsGroup.depth > 0; }

ncclResult_t groupStart() {
  ++tlsGroup.depth;
  return ncclSuccess;
}

void groupRecordError(ncclResult_t err) {
  if (tlsGroup.depth == 0 || tlsGroup.error != ncclSuccess) return;
  tlsGroup.error = err;
  tlsGroup.message = lastErrorMessage();
}

void groupDropComm(const ncclComm* comm, const char* fn) {
  GroupState& g = tlsGroup;
  if (g.depth == 0) return;
  // A queued finalize is moot (destroy finalizes itself): dropped silently.
  std::erase_if(g.inits, [comm](const QueuedInit& i) { return i.comm == comm && i.finalize; });
  const size_t dropped = std::erase_if(g.tasks, [comm](const Task& t) { return t.comm == comm; }) +
                         std::erase_if(g.inits, [comm](const QueuedInit& i) { return i.comm == comm; });
  if (dropped == 0 || g.error != ncclSuccess) return;
  char why[256];
  snprintf(why, sizeof(why),
           "%s was called on communicator %p inside a group with %zu call(s) queued on it; they were dropped and the "
           "group runs nothing",
           fn, static_cast<const void*>(comm), dropped);
  CHORUS_WARN(kLogAll, "%s", why);
  g.error = ncclInvalidUsage;
  g.message = why;
}

ncclResult_t groupEnd() {
  GroupState& g = tlsGroup;
  if (g.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not inside a group (missing ncclGroupStart)");
  if (--g.depth > 0) return ncclSuccess;
  if (g.error != ncclSuccess) {
    const ncclResult_t err = g.error;
    const std::string why = std::move(g.message);
    g.clear();
    return fail(err, "ncclGroupEnd: an operation in the group failed earlier: %s", why.c_str());
  }
  if (!g.inits.empty() && !g.tasks.empty()) {
    g.clear();
    return fail(ncclInvalidUsage, "ncclGroupEnd: communicator creation and operations cannot be mixed in one group");
  }
  auto inits = std::move(g.inits);
  auto tasks = std::move(g.tasks);
  g.clear();
  // Another thread may have destroyed or aborted a communicator this group
  // holds calls on (its own groupDropComm sees only its own group).
  for (const Task& t : tasks)
    if (!CommRegistry::instance().contains(t.comm)) return goneFromGroup(t.comm);
  for (const QueuedInit& i : inits)
    if (!CommRegistry::instance().contains(i.comm)) return goneFromGroup(i.comm);
  if (!inits.empty()) return runInits(inits);
  return executeTasks(tasks);
}

ncclResult_t groupSimulateEnd(float* estimatedUs) {
  GroupState& g = tlsGroup;
  if (g.depth == 0) return fail(ncclInvalidUsage, "ncclGroupSimulateEnd: not inside a group");
  if (--g.depth > 0) return ncclSuccess;
  double total = 0;
  // Each rank's operations are serial; ranks driven by this thread run in parallel.
  std::vector<std::pair<ncclComm*, double>> perComm;
  for (const Task& t : g.tasks) {
    TuneDecision d;
    if (tuneTask(t, t.comm->id.nranks, t.comm->config, t.comm->graph.get(), &d) != ncclSuccess) continue;
    auto it = std::find_if(perComm.begin(), perComm.end(), [&](auto& e) { return e.first == t.comm; });
    if (it == perComm.end())
      perComm.emplace_back(t.comm, d.estimatedUs);
    else
      it->second += d.estimatedUs;
  }
  for (auto& e : perComm) total = std::max(total, e.second);
  g.clear();
  *estimatedUs = static_cast<float>(total);
  return ncclSuccess;
}

ncclResult_t enqueueTask(const Task& task) {
  if (tlsGroup.depth > 0) {
    tlsGroup.tasks.push_back(task);
    return ncclSuccess;
  }
  return executeTasks(std::span<const Task>(&task, 1));
}

ncclResult_t enqueueInit(const ncclComm* uses, bool finalize, std::function<ncclResult_t()> init) {
  if (tlsGroup.depth > 0) {
    tlsGroup.inits.push_back({std::move(init), uses, finalize});
    return ncclSuccess;
  }
  return init();
}

}  // namespace chorus
