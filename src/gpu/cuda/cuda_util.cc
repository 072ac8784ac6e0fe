#include "gpu/cuda/cuda_util.h"

namespace chorus::gpu {

ncclResult_t cudaFailure(cudaError_t err, const char* what, const char* file, int line) {
  return fail(ncclUnhandledCudaError, "%s failed: %s: %s (%s:%d)", what, cudaGetErrorName(err), cudaGetErrorString(err),
              file, line);
}

void* driverEntryPoint(const char* name) {
  constexpr unsigned kDriverVersionOfTheCalls = 11070;
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, kDriverVersionOfTheCalls, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return fn;
}

namespace {

// Whether the calling thread has a current CUDA context (true when the
// driver cannot say: then the scope restores, as it always did).
bool threadHasContext() {
  using GetCurrentFn = int (*)(void** context);
  static const auto getCurrent = driverCall<GetCurrentFn>("cuCtxGetCurrent");
  void* context = nullptr;
  return getCurrent == nullptr || getCurrent(&context) != 0 || context != nullptr;
}

}  // namespace

DeviceScope::DeviceScope(int device) : restore_(threadHasContext()) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (device >= 0 && device != previous_) status_ = cudaSetDevice(device);
}

DeviceScope::~DeviceScope() {
  int now = -1;
  if (restore_ && previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_)
    (void)cudaSetDevice(previous_);
}

RelaxedCaptureScope::RelaxedCaptureScope() {
  previous_ = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&previous_);
}

RelaxedCaptureScope::~RelaxedCaptureScope() { (void)cudaThreadExchangeStreamCaptureMode(&previous_); }

ncclResult_t zeroDeviceMemory(void* ptr, size_t bytes) {
  RelaxedCaptureScope relaxed;
  cudaStream_t s = nullptr;
  CHORUS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaError_t err = cudaMemsetAsync(ptr, 0, bytes, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  (void)cudaStreamDestroy(s);
  CHORUS_CUDA_CHECK(err);
  return ncclSuccess;
}

}  // namespace chorus::gpu
