// Host-side launchers of the lane and wire kernels: what the generated
// instance files (kernels/generate_instances.py) call. Kept apart from the
// kernels' device code (lane_kernel.cuh, wire_kernel.cuh), which is also
// compiled for the CPU by the tests that run the kernels on CPU threads
// (tests/kernel_sim/).
#pragma once

#include "kernels/colls/lane_kernel.cuh"
#include "kernels/colls/wire_kernel.cuh"
#include "kernels/launch.h"

namespace chorus::dev {

// Loads `kernel` on the current device (preloadLaneKernels) and raises
// `*stackBytes` to its per-thread stack if that is larger.
template <typename Kernel>
cudaError_t preloadKernel(Kernel* kernel, size_t* stackBytes) {
  cudaFuncAttributes attr;
  const cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
  if (e == cudaSuccess && attr.localSizeBytes > *stackBytes) *stackBytes = attr.localSizeBytes;
  return e;
}

// Checks and packs `L` (elements of `elemBytes`) and launches `kernel` with
// one block per lane.
inline cudaError_t launchPacked(void (*kernel)(LaneParams), const LaneLaunch& L, size_t elemBytes,
                                cudaStream_t stream) {
  if (L.nLanes <= 0) return cudaSuccess;
  // Built per launch on the host stack; the launch copies it.
  LaneParams params;
  const cudaError_t packed = packLaneParams(L, elemBytes, &params);
  if (packed != cudaSuccess) return packed;
  (void)cudaGetLastError();  // report this launch's error, not an earlier one (e.g. an event query's NotReady)
  kernel<<<L.nLanes, L.threads, 0, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, ReduceKind K>
cudaError_t launchLanesKind(const LaneLaunch& L, cudaStream_t stream) {
  return launchPacked(laneKernel<T, K>, L, sizeof(T), stream);
}

template <typename T, ReduceKind K>
cudaError_t launchWireKind(const LaneLaunch& L, cudaStream_t stream) {
  if (!L.wire && L.nLanes > 0) return cudaErrorInvalidValue;
  return launchPacked(wireKernel<T, K>, L, sizeof(T), stream);
}

}  // namespace chorus::dev
