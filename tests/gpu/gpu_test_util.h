// Helpers of the GPU tests: skipping visibly when no GPU is usable, device
// buffers that free themselves, and checked CUDA calls.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace chorus::gputest {

// Empty when a CUDA device is usable, else why not (printed by the skip).
inline std::string whyNoGpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device";
  return "";
}

#define CHORUS_REQUIRE_GPU()                                         \
  do {                                                               \
    const std::string why_ = ::chorus::gputest::whyNoGpu();          \
    if (!why_.empty()) GTEST_SKIP() << "GPU test skipped: " << why_; \
  } while (0)

// Asserts that a CUDA call succeeds; the call runs exactly once.
#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    const cudaError_t cuda_ok_err_ = (call);                                                   \
    ASSERT_EQ(cuda_ok_err_, cudaSuccess) << #call << ": " << cudaGetErrorString(cuda_ok_err_); \
  } while (0)

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, bytes ? bytes : 1) != cudaSuccess)
      ptr_ = nullptr;
    else
      cudaMemset(ptr_, 0, bytes ? bytes : 1);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  bool upload(const void* host) const { return cudaMemcpy(ptr_, host, bytes_, cudaMemcpyHostToDevice) == cudaSuccess; }
  bool download(void* host) const { return cudaMemcpy(host, ptr_, bytes_, cudaMemcpyDeviceToHost) == cudaSuccess; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

}  // namespace chorus::gputest
