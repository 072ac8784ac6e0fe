// Host plan -> lane-kernel launches: the first half of the GPU executor.
//
// A HostPlan (src/host/host_plan.h) is what one rank must do for one group of
// operations, as lanes of steps over connectors. The GPU runs the same plan
// with the lane kernel (kernels/colls/lane_kernel.cuh), whose input is flat
// arrays: lanes, steps, and connector ends (kernels/lane_plan.h). This file
// produces those arrays; it is plain C++ (no CUDA), so it is unit-tested on
// machines without a GPU.
//
// One launch runs one reduction spec (the kernel is instantiated per element
// type and reduction), so consecutive tasks with equal specs share a launch
// and a change of spec starts the next one, in task order. Caveat for the
// executor: one rank's launches run in order on its stream, so a group that
// mixes specs *and* exchanges data both ways between two ranks across those
// launches (A sends floats then receives ints from B; B sends ints then
// receives floats) can block once a message exceeds the FIFO. Such groups need
// their specs in one launch (a per-step type in the kernel) or separate
// streams. Connector ends keep their position counters in device memory (they must survive from
// launch to launch and through CUDA graph replays); the caller says where.
#pragma once

#include <functional>
#include <vector>

#include "host/host_plan.h"
#include "kernels/lane_plan.h"
#include "nccl.h"

namespace chorus::gpu {

// The arrays of one launch, in host memory; the executor uploads them (or
// passes them as kernel parameters) and fills the header's pointers.
struct LaunchArrays {
  dev::LaneLaunch header;  // type, kind, scalar, divisor; array pointers left null
  std::vector<dev::DevLane> lanes;
  std::vector<dev::DevStep> steps;
  std::vector<dev::DevFifo> fifos;
};

// Where the position counter of a connector end lives on the device.
using PositionFor = std::function<uint64_t*(const FifoEnd& end, bool sender)>;

// At most this many lanes per launch: every block of a launch must be
// resident at once (lanes wait for each other), also when several ranks share
// a GPU.
inline constexpr size_t kMaxLanesPerLaunch = 64;

// Translates `plan`. Errors (ncclInternalError with a message) when the plan
// breaks an invariant the kernel relies on: a connector used by two lanes, a
// piece larger than a slot, too many lanes.
ncclResult_t translatePlan(const HostPlan& plan, const PositionFor& positionFor, std::vector<LaunchArrays>* out);

// Payload bytes per piece a lane of protocol `proto` moves through slots of
// `slotBytes` on the GPU (LL carries half a slot, at most kLLMaxPieceBytes).
uint32_t devicePieceBytes(Proto proto, size_t lanePieceBytes, uint32_t slotBytes);

}  // namespace chorus::gpu
