#include "plan/plan_cache.h"

namespace chorus {

bool sameTask(const Task& a, const Task& b) {
  return a.type == b.type && a.comm == b.comm && a.sendbuff == b.sendbuff && a.recvbuff == b.recvbuff &&
         a.count == b.count && a.dtype == b.dtype && a.root == b.root && a.spec.type == b.spec.type &&
         a.spec.kind == b.spec.kind && a.spec.scalar == b.spec.scalar && a.spec.divisor == b.spec.divisor &&
         a.wire.format == b.wire.format && a.wire.deterministic == b.wire.deterministic &&
         a.wire.residual == b.wire.residual;
}

Plan* PlanCache::find(std::span<const Task> tasks, uint64_t registrationEpoch) {
  for (auto it = plans_.begin(); it != plans_.end(); ++it) {
    const std::vector<Task>& cached = (*it)->tasks;
    if (cached.size() != tasks.size() || (*it)->registrationEpoch != registrationEpoch) continue;
    bool same = true;
    for (size_t i = 0; i < tasks.size() && same; ++i) same = sameTask(cached[i], tasks[i]);
    if (!same) continue;
    if (it != plans_.begin()) plans_.splice(plans_.begin(), plans_, it);
    Plan* plan = plans_.front().get();
    for (Lane& lane : plan->lanes) lane.rewind();
    ++hits_;
    return plan;
  }
  return nullptr;
}

Plan* PlanCache::insert(std::unique_ptr<Plan> plan) {
  ++builds_;
  plans_.push_front(std::move(plan));
  if (plans_.size() > kCapacity) plans_.pop_back();
  return plans_.front().get();
}

}  // namespace chorus
