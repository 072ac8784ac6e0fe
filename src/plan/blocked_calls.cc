#include "plan/blocked_calls.h"

#include "core/coll_types.h"

namespace chorus {
namespace {

// Whether a rooted collective of rank `self` moves data directly between it
// and rank `other`, and so cannot complete before `other` calls it: a root
// of a reduce, gather or scatter exchanges with every rank, and a broadcast,
// gather or scatter rank other than the root gets its data from the root or
// hands it there. Completion marks are not counted on: they do not cross
// every link (GPU-mode network links), and inside a group they are not
// waited for.
bool rootedNeeds(CollType c, int root, int self, int other) {
  if (self == root) return c == CollType::Reduce || c == CollType::Gather || c == CollType::Scatter;
  return other == root && (c == CollType::Broadcast || c == CollType::Gather || c == CollType::Scatter);
}

}  // namespace

bool needsUnnumbered(const CallTask& t, int self, int other, const PeerCounts& otherCounts) {
  const OpPrint& p = t.print;
  if (!p.valid || p.count == 0 || self == other) return false;
  switch (static_cast<CollType>(p.coll)) {
    case CollType::Send:
      return t.peer == other && p.seq > otherCounts.receives;
    case CollType::Recv:
      return t.peer == other && p.seq > otherCounts.sends;
    case CollType::AllReduce:
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AlltoAll:
      return p.seq > otherCounts.collectives;  // every rank's data reaches every rank
    case CollType::Broadcast:
    case CollType::Reduce:
    case CollType::Gather:
    case CollType::Scatter:
      return p.seq > otherCounts.collectives && rootedNeeds(static_cast<CollType>(p.coll), p.root, self, other);
  }
  return false;
}

int firstUnmetNeed(const std::vector<CallTask>& tasks, int self, int other, const PeerCounts& otherCounts) {
  for (size_t i = 0; i < tasks.size(); ++i)
    if (needsUnnumbered(tasks[i], self, other, otherCounts)) return static_cast<int>(i);
  return -1;
}

}  // namespace chorus
