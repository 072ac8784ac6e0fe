// Plan -> lane-kernel launches: the first half of the GPU executor.
//
// A Plan (src/plan/plan.h) is what one rank must do for one group of
// operations, as lanes of segments over connectors. The GPU runs the same
// plan with the lane kernel (kernels/colls/lane_kernel.cuh), whose input is
// flat arrays: lanes, segments, connector ends and ring tables
// (kernels/lane_plan.h); the kernel generates the steps. This file
// produces those arrays; it is plain C++ (no CUDA), so it is unit-tested on
// machines without a GPU.
//
// One launch runs one reduction spec (the kernel is instantiated per element
// type and reduction). Consecutive collectives with equal specs share a
// launch while it fits the kernel's parameter block (kernels/lane_plan.h); a
// change of spec, or a full launch, starts the next one, always at a task
// boundary: a task's lanes wait for each other, so a task is never split.
// Consecutive point-to-point tasks form one unit, never split by task (a send
// and a receive of one group may depend on each other in any order); they
// move bytes, so the unit runs as one byte-copy launch whatever its
// datatypes. A unit too large for one launch (an all-to-all of many ranks)
// is cut by peer instead, into launches of whole rounds in increasing order:
// round d holds the sends to rank + d and the receives from rank - d, so a
// send and the receive it pairs with are in the same round on both ranks.
// A direct reduction (compressed wires, deterministic mode, docs/wire.md)
// gets a launch of its own, marked LaneLaunch::wire with the task's format
// and residual, which the wire kernel runs; its segments' rank tables name
// connectors, which become fifo indices like Segment::conn. Connector ends
// keep their position counters in device memory (they must survive from
// launch to launch and through CUDA graph replays); the caller says where.
#pragma once

#include <functional>
#include <vector>

#include "kernels/lane_plan.h"
#include "nccl.h"
#include "plan/plan.h"

namespace chorus::gpu {

// The arrays of one launch, in host memory; the executor uploads them (or
// passes them as kernel parameters) and fills the header's pointers.
struct LaunchArrays {
  dev::LaneLaunch header;     // type, kind, scalar, divisor, counts; array pointers left null
  bool scalarOnHost = false;  // PreMulSum: header.scalar is host memory; the launch copies the value
  std::vector<dev::DevLane> lanes;
  std::vector<sched::Segment> segments;  // conn: indices of `fifos`; ringTable: of `rankTable`
  std::vector<dev::DevFifo> fifos;
  std::vector<int32_t> rankTable;
  // The plan's tasks in the launch: Segment::task of `segments` indexes this
  // list, whose entries index Plan::tasks (and Plan::stamps, whose
  // fingerprints the executor copies into the launch: they change per call).
  std::vector<size_t> tasks;
};

// Where the position counter of a connector end lives on the device.
using PositionFor = std::function<uint64_t*(const FifoEnd& end, bool sender)>;

// At most this many lanes per launch: every block of a launch must be
// resident at once (lanes wait for each other), also when several ranks share
// a GPU.
inline constexpr size_t kMaxLanesPerLaunch = 64;

// Translates `plan`. A send end the plan's receives do not prove matched
// (Plan::unprovenSends; every send end of a plan that was never stamped)
// is drained by its lane at the end of the launch (DevFifo::drainBy).
// Errors with a message: ncclInvalidUsage when one task (or one round of a
// point-to-point group) needs more than one launch holds; ncclInternalError
// when the plan breaks an invariant the kernel relies on (a connector used by
// two lanes, a piece larger than a slot, steps out of task order).
// `maxLanes` (at most kMaxLanesPerLaunch): the thread blocks one launch may
// use on this device (fewer when ranks share the GPU).
ncclResult_t translatePlan(const Plan& plan, const PositionFor& positionFor, std::vector<LaunchArrays>* out,
                           size_t maxLanes = kMaxLanesPerLaunch);

// The header of launch `la` of `plan` for this call: the launch's arrays,
// this call's fingerprints (copied into `prints`, kLaunchMaxTasks entries
// that must outlive the launch; none when the plan was not stamped), this
// rank, and a host scalar's bytes. The caller sets where the kernel reports
// (abortFlag, status, waits), timeoutNs and threads.
dev::LaneLaunch launchHeader(const Plan& plan, const LaunchArrays& la, OpPrint* prints);

// Payload bytes per piece a lane of protocol `proto` moves through slots of
// `slotBytes` on the GPU (LL carries half a slot, at most kLLMaxPieceBytes).
uint32_t devicePieceBytes(Proto proto, size_t lanePieceBytes, uint32_t slotBytes);

}  // namespace chorus::gpu
