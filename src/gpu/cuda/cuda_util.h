// CUDA runtime helpers for the library's host code (CUDA builds only): the
// one checking macro that turns a cudaError_t into an ncclResult_t with a
// message, a scoped device switch, and a scoped relaxed capture mode for
// setup work that may happen while the user's stream is being captured.
#pragma once

#include <cuda_runtime_api.h>

#include "core/result.h"

namespace chorus::gpu {

// Records "<what> failed: <cuda error name>: <description> (file:line)" and
// returns ncclUnhandledCudaError.
ncclResult_t cudaFailure(cudaError_t err, const char* what, const char* file, int line);

#define CHORUS_CUDA_CHECK(call)                                                       \
  do {                                                                                \
    cudaError_t chorus_cuda_err_ = (call);                                            \
    if (chorus_cuda_err_ != cudaSuccess)                                              \
      return ::chorus::gpu::cudaFailure(chorus_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)

// Makes `device` current for the scope; restores the previous one after.
// A driver API function by name, through the runtime (no link against
// libcuda); null when the driver lacks it.
void* driverEntryPoint(const char* name);
template <class Fn>
Fn driverCall(const char* name) {
  return reinterpret_cast<Fn>(driverEntryPoint(name));
}

class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  // The error of the switch itself (e.g. an invalid device).
  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  // The thread had a current context: the scope's end restores its device.
  // A thread that never chose one (a library thread, a user thread that only
  // destroys a communicator) stays on `device`: restoring "device 0", what
  // cudaGetDevice says there, would create a context on GPU 0.
  bool restore_ = true;
  cudaError_t status_ = cudaSuccess;
};

// Allocation, IPC and synchronous copies are "unsafe" while a stream of this
// thread is being captured in global mode; NCCL-style libraries switch the
// thread to relaxed mode around their setup work. The work itself never goes
// to the capturing stream (setup copies use a private stream).
class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope();
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

// Zeroes `bytes` of device memory synchronously without touching the legacy
// default stream (which would join a capture in progress).
ncclResult_t zeroDeviceMemory(void* ptr, size_t bytes);

}  // namespace chorus::gpu
