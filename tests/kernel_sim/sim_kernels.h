// The lane and wire kernels on CPU threads (cuda_sim.h): what the tests of
// this folder call instead of a CUDA launch.
#pragma once

#include <string>
#include <vector>

#include "kernels/lane_plan.h"

namespace chorus::sim {

// Runs one packed launch (dev::packLaneParams) as the GPU would: the lane
// kernel, or the wire kernel when params.L.wire, for params.L's element type
// and reduction, with params.L.nLanes blocks of params.L.threads threads.
// Returns false, with a line in *faults, when this build has no CPU
// instance of that (type, reduction); otherwise true, with the block
// faults cuda_sim.h finds (barrier misuse) in *faults.
bool runLaunch(const dev::LaneParams& params, std::vector<std::string>* faults);

}  // namespace chorus::sim
