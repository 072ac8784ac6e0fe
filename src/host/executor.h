// The host executor: runs Plans to completion on the calling thread.
//
// All lanes of all plans (one plan per communicator in a group, possibly
// several ranks driven by one thread) are advanced round-robin, one piece at
// a time, without ever blocking on a single connector. When a full pass makes
// no progress the thread backs off: it spins for a while (cheap when ranks
// have their own cores; each thread learns to skip it when its peer shares
// its CPU, host/spin_budget.h), then yields, then sleeps in growing steps up to
// 200 us (so 8 ranks on 2 cores still hand the CPU to whoever can progress).
// While idle it also checks every ~50 ms the abort/revoke flags, whether
// peer processes still exist, and the no-progress timeout.
#pragma once

#include <span>

#include "plan/plan.h"

namespace chorus {

// On failure every plan's communicator is put into the error state and the
// error (with a message naming the peer) is returned.
ncclResult_t runHostPlans(std::span<Plan* const> plans);

// Whether process `pid` (a peer on this host) still runs; a zombie counts as gone.
bool peerProcessAlive(int pid);

// Moves one piece of the lane's current step if its connectors are ready.
// Returns true if it did. On a protocol violation sets *err.
bool progressLane(const Plan& plan, Lane& lane, ncclResult_t* err);

// The step `lane` waits on (moving its cursor past finished steps, but not
// past one whose user-memory sends are still leaving), or null when the lane
// has finished.
const ActiveStep* waitingStep(const Plan& plan, Lane& lane);

}  // namespace chorus
