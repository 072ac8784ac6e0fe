// The host executor's data path for the direct reductions of docs/wire.md
// (sched::SegmentKind::WireSend, WireOwner, WireGather).
#pragma once

#include "plan/plan.h"

namespace chorus {

// Moves the lane's current step (one piece of a wire segment, already loaded
// by progressLane) if all of its connectors are ready; true if it did. On a
// mismatch between the ranks' calls sets *err.
bool progressWireLane(const Plan& plan, Lane& lane, ncclResult_t* err);

}  // namespace chorus
