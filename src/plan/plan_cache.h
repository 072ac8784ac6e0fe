// Recently used plans of one communicator. Training loops and benchmarks
// issue the same operation on the same buffers again and again; rebuilding
// the plan (tuning, schedule expansion, connector lookups) would cost more
// than moving a small message. A plan is reused only when every task field
// that shaped it is identical, buffers included.
#pragma once

#include <list>
#include <memory>
#include <span>
#include <vector>

#include "plan/plan.h"

namespace chorus {

class PlanCache {
 public:
  // A ready-to-run plan for exactly these tasks, built while the
  // communicator's registrations were at `registrationEpoch`, or nullptr.
  Plan* find(std::span<const Task> tasks, uint64_t registrationEpoch);
  // Takes ownership; evicts the least recently used plan beyond capacity.
  Plan* insert(std::unique_ptr<Plan> plan);
  // Lookups answered from the cache, and plans inserted (built), so far.
  uint64_t hits() const { return hits_; }
  uint64_t builds() const { return builds_; }

 private:
  static constexpr size_t kCapacity = 16;
  std::list<std::unique_ptr<Plan>> plans_;  // most recent first
  uint64_t hits_ = 0;
  uint64_t builds_ = 0;
};

bool sameTask(const Task& a, const Task& b);

}  // namespace chorus
