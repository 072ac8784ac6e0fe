// The GPU-mode end of a group: the plans (built and connected exactly as in
// host mode) are checked and handed to the GPU executor, which enqueues them
// on the callers' streams and returns without waiting.
#pragma once

#include <span>
#include <vector>

#include "plan/plan.h"

namespace chorus {

// The distinct streams of `tasks`, in call order.
std::vector<cudaStream_t> streamsOf(std::span<const Task> tasks);

// plans[i] was built for the tasks whose streams are streams[i]. On failure
// the communicators are put into the error state.
ncclResult_t submitToGpu(std::span<Plan* const> plans, std::span<const std::vector<cudaStream_t>> streams);

}  // namespace chorus
