// The kernels' device code compiled for the CPU: cuda_sim.h first, then the
// same headers the CUDA instance files include (kernels/colls/), and the
// (type, reduction) pairs the tests use.
#include "kernel_sim/cuda_sim.h"
// The kernels after the built-ins they use.
#include "kernel_sim/sim_kernels.h"
#include "kernels/colls/lane_kernel.cuh"
#include "kernels/colls/wire_kernel.cuh"

namespace chorus::sim {
namespace {

template <typename T, ReduceKind K>
std::vector<std::string> runAs(const dev::LaneParams& params) {
  if (params.L.wire) return launch(params.L.nLanes, params.L.threads, [&params] { dev::wireKernel<T, K>(params); });
  return launch(params.L.nLanes, params.L.threads, [&params] { dev::laneKernel<T, K>(params); });
}

template <typename T>
bool runKind(const dev::LaneParams& params, std::vector<std::string>* faults) {
  switch (params.L.kind) {
    case ReduceKind::Sum:
      *faults = runAs<T, ReduceKind::Sum>(params);
      return true;
    case ReduceKind::Max:
      *faults = runAs<T, ReduceKind::Max>(params);
      return true;
    case ReduceKind::PreMulSum:
      *faults = runAs<T, ReduceKind::PreMulSum>(params);
      return true;
    case ReduceKind::SumPostDiv:
      *faults = runAs<T, ReduceKind::SumPostDiv>(params);
      return true;
    default:
      return false;
  }
}

}  // namespace

bool runLaunch(const dev::LaneParams& params, std::vector<std::string>* faults) {
  bool compiled = false;
  switch (params.L.type) {
    case ncclFloat32:
      compiled = runKind<float>(params, faults);
      break;
    case ncclBfloat16:
      compiled = runKind<bf16_t>(params, faults);
      break;
    case ncclFloat16:
      compiled = params.L.kind == ReduceKind::Sum && runKind<half_t>(params, faults);
      break;
    case ncclInt32:
      compiled = params.L.kind == ReduceKind::Sum && runKind<int32_t>(params, faults);
      break;
    case ncclUint8:  // point-to-point byte copies
      compiled = params.L.kind == ReduceKind::Sum && runKind<uint8_t>(params, faults);
      break;
    default:
      break;
  }
  if (!compiled)
    faults->assign(1, "no CPU instance of the kernels for type " + std::to_string(params.L.type) + ", reduction " +
                          std::to_string(static_cast<int>(params.L.kind)));
  return compiled;
}

}  // namespace chorus::sim
