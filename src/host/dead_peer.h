// When a dead peer process fails a host-mode operation.
//
// A peer on this host that exited is an error for this rank only when this
// rank still needs something from it that it has not already delivered:
//   * a receive from it whose FIFO is empty (checked after its death was
//     seen, so everything it wrote before exiting has been taken), or
//   * anything left to send to it, in the current step or a later one: a
//     peer that finished its part took everything addressed to it, so a send
//     still pending means it died before finishing (and its slots will never
//     be freed).
// A receive a network proxy feeds is judged once its link failed or the
// proxy had time to move what was in flight (`proxiesDrained`).
// A receive from it in a later step is not judged yet: its data may be in
// the FIFO already; it is judged when the lane gets there.
#pragma once

#include <vector>

#include "core/result.h"
#include "plan/plan.h"

namespace chorus {

// Ranks of the peer processes on this host (of `plan`'s communicator) that
// have exited.
std::vector<int> deadLocalPeers(const Plan& plan);

// ncclRemoteError naming the first rank of `dead` that `plan` still needs
// (the rule above), or ncclSuccess when none is needed. Call it only after a
// progress pass that followed the observation of the deaths.
ncclResult_t checkDeadPeersNeeded(Plan& plan, const std::vector<int>& dead, bool proxiesDrained);

// How long after a death is first seen a proxy is given to deliver what the
// peer sent before it exited (same host: the bytes are in our socket already).
inline constexpr int kDeadPeerDrainMs = 500;

}  // namespace chorus
