#include "enqueue/group.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "core/result.h"
#include "host/executor.h"
#include "host/plan_builder.h"

namespace chorus {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<Task> tasks;
  std::vector<std::function<ncclResult_t()>> inits;
  ncclResult_t error = ncclSuccess;
  void clear() {
    tasks.clear();
    inits.clear();
    error = ncclSuccess;
  }
};

thread_local GroupState tlsGroup;

ncclResult_t runInits(std::vector<std::function<ncclResult_t()>>& inits) {
  if (inits.size() == 1) return inits[0]();
  std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
  std::vector<std::string> messages(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] {
      results[i] = inits[i]();
      messages[i] = lastErrorMessage();
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < inits.size(); ++i)
    if (results[i] != ncclSuccess && results[i] != ncclInProgress)
      return fail(results[i], "%s", messages[i].c_str());
  return ncclSuccess;
}

// Groups the tasks by communicator, keeping each communicator's call order.
std::vector<std::unique_ptr<HostPlan>> splitByComm(std::vector<Task>& tasks) {
  std::vector<std::unique_ptr<HostPlan>> plans;
  for (Task& t : tasks) {
    auto it = std::find_if(plans.begin(), plans.end(), [&](auto& p) { return p->comm == t.comm; });
    if (it == plans.end()) {
      plans.push_back(std::make_unique<HostPlan>());
      plans.back()->comm = t.comm;
      it = plans.end() - 1;
    }
    (*it)->tasks.push_back(t);
  }
  return plans;
}

// Holds each communicator's operation lock and in-flight count for the
// duration of the group (locks taken in address order: no lock-order cycles).
class CommGuards {
 public:
  explicit CommGuards(std::vector<ncclComm*> comms) : comms_(std::move(comms)) {
    std::sort(comms_.begin(), comms_.end());
    for (ncclComm* c : comms_) {
      c->opMutex.lock();
      c->inflight.fetch_add(1);
    }
  }
  ~CommGuards() {
    for (ncclComm* c : comms_) {
      c->inflight.fetch_sub(1);
      c->opMutex.unlock();
    }
  }

 private:
  std::vector<ncclComm*> comms_;
};

ncclResult_t executeTasks(std::vector<Task>& tasks) {
  if (tasks.empty()) return ncclSuccess;
  auto plans = splitByComm(tasks);
  std::vector<ncclComm*> comms;
  for (auto& p : plans) comms.push_back(p->comm);
  CommGuards guards(comms);
  for (auto& p : plans) CHORUS_CHECK(commCheckUsable(p->comm, collName(p->tasks[0].type)));
  std::vector<HostPlan*> raw;
  for (auto& p : plans) {
    PlanBuilder builder(p->comm, p.get());
    ncclResult_t res = builder.build();
    if (res != ncclSuccess) {
      commSetError(p->comm, res, lastErrorMessage());
      return res;
    }
    raw.push_back(p.get());
  }
  for (auto& p : plans) {
    WaitBound bound{Clock::now() + std::chrono::milliseconds(p->comm->config.timeoutMs), &p->comm->abortFlag};
    ncclResult_t res = p->comm->conns->connectAll(bound);
    if (res != ncclSuccess) {
      commSetError(p->comm, res, lastErrorMessage());
      return res;
    }
  }
  return runHostPlans(raw);
}

}  // namespace

bool inGroup() { return tlsGroup.depth > 0; }

ncclResult_t groupStart() {
  ++tlsGroup.depth;
  return ncclSuccess;
}

void groupRecordError(ncclResult_t err) {
  if (tlsGroup.depth > 0 && tlsGroup.error == ncclSuccess) tlsGroup.error = err;
}

ncclResult_t groupEnd() {
  GroupState& g = tlsGroup;
  if (g.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not inside a group (missing ncclGroupStart)");
  if (--g.depth > 0) return ncclSuccess;
  if (g.error != ncclSuccess) {
    ncclResult_t err = g.error;
    g.clear();
    return fail(err, "ncclGroupEnd: an operation in the group failed earlier: %s", lastErrorMessage());
  }
  if (!g.inits.empty() && !g.tasks.empty()) {
    g.clear();
    return fail(ncclInvalidUsage, "ncclGroupEnd: communicator creation and operations cannot be mixed in one group");
  }
  auto inits = std::move(g.inits);
  auto tasks = std::move(g.tasks);
  g.clear();
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
    if (tuneTask(t, t.comm->id.nranks, t.comm->config, &d) != ncclSuccess) continue;
    auto it = std::find_if(perComm.begin(), perComm.end(), [&](auto& e) { return e.first == t.comm; });
    if (it == perComm.end()) perComm.emplace_back(t.comm, d.estimatedUs);
    else it->second += d.estimatedUs;
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
  std::vector<Task> one{task};
  return executeTasks(one);
}

ncclResult_t enqueueInit(std::function<ncclResult_t()> init) {
  if (tlsGroup.depth > 0) {
    tlsGroup.inits.push_back(std::move(init));
    return ncclSuccess;
  }
  return init();
}

}  // namespace chorus
