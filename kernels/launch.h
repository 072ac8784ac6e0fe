// Host-side entry points of the CUDA kernels (compiled only when
// CHORUS_ENABLE_CUDA is on). Callers are host C++ files of the GPU executor,
// tests and benchmarks; nothing here needs nvcc.
//
// Which (datatype, reduction) pairs have kernels is decided at configure time
// by CHORUS_KERNEL_FILTER (see kernels/README.md): a development build can
// compile a few instances, a release build compiles all. Asking for an
// instance that was filtered out returns cudaErrorNotSupported, never a
// silent wrong result.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/common/reduce_kind.h"
#include "kernels/lane_plan.h"
#include "nccl.h"

namespace chorus::dev {

// dst[i] = post?(pre_a?(a[i]) (+) pre_b?(b[i])) over `count` elements; b may
// be null (then dst[i] = post?(pre_a?(a[i]))). Pointers are device (or
// device-accessible) memory; dst may equal a or b.
struct ReduceLaunch {
  ncclDataType_t type = ncclFloat32;
  ReduceKind kind = ReduceKind::Sum;
  bool preA = false;
  bool preB = false;
  bool post = false;
  const void* scalar = nullptr;  // PreMulSum: device pointer to one element of `type`
  int divisor = 1;               // SumPostDiv: the rank count
  void* dst = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  size_t count = 0;
  int maxBlocks = 0;  // 0: enough blocks to fill the device once
};

cudaError_t launchReduce(const ReduceLaunch& args, cudaStream_t stream);

// Runs a lane plan (kernels/lane_plan.h): one block per lane, all blocks
// co-resident. The arrays of `args` are host memory, copied into the kernel's
// parameters. The caller reads LaneLaunch::status (device-visible host
// memory) to learn about aborts, timeouts and protocol violations.
cudaError_t launchLanes(const LaneLaunch& args, cudaStream_t stream);

// Runs a wire launch (LaneLaunch::wire: the lanes of one direct reduction,
// docs/wire.md) with the wire kernel; otherwise as launchLanes.
cudaError_t launchWire(const LaneLaunch& args, cudaStream_t stream);

// Validates `args` against the kernel's limits and copies it into `params`:
// cudaErrorInvalidValue for more lanes, connector ends or steps than a launch
// holds, indices out of range, a bad thread count, or an LL piece that does
// not fit the shared-memory stage. `elemBytes` is the element size.
cudaError_t packLaneParams(const LaneLaunch& args, size_t elemBytes, LaneParams* params);

// Loads every lane and wire kernel of this build on the current device now. With lazy
// module loading, a kernel's first launch may wait for the device to go idle,
// which never happens while another rank's lane kernel spins waiting for it;
// the executor calls this once per device before its first launch.
// `*stackBytes` receives the largest per-thread stack (local memory) of those
// kernels: a launch that needs more than the device's stack limit grows the
// limit, which waits for the device to go idle in the same way.
cudaError_t preloadLaneKernels(size_t* stackBytes);

// Whether this build has the kernels for (type, kind).
bool kernelCompiled(ncclDataType_t type, ReduceKind kind);

// The filter this build was configured with, e.g. "all" or "f32:sum,bf16:*".
const char* kernelFilter();

}  // namespace chorus::dev
