// Device discovery, device memory and host-memory mapping (CUDA builds).
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/host_identity.h"
#include "core/log.h"
#include "gpu/cuda/cuda_util.h"
#include "gpu/gpu_runtime.h"

namespace chorus::gpu {

bool built() { return true; }

bool usable(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it for the caller
    if (why != nullptr) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device is visible (CUDA_VISIBLE_DEVICES?)";
    return false;
  }
  return true;
}

ncclResult_t currentDevice(int* device) {
  CHORUS_CUDA_CHECK(cudaGetDevice(device));
  return ncclSuccess;
}

ncclResult_t selectDevice(int device) {
  CHORUS_CUDA_CHECK(cudaSetDevice(device));
  return ncclSuccess;
}

std::string pciBusId(int device) {
  char buf[32] = {};
  if (cudaDeviceGetPCIBusId(buf, sizeof(buf), device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return buf;
}

uint64_t visibleGpusHash() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  std::vector<std::string> ids;
  for (int d = 0; d < n; ++d) ids.push_back(pciBusId(d));
  std::sort(ids.begin(), ids.end());
  std::string all;
  for (const std::string& id : ids) all += id + ";";
  return hashBytes(all.data(), all.size());
}

int deviceWithBusId(const char* busId) {
  int device = -1;
  if (busId == nullptr || busId[0] == '\0' || cudaDeviceGetByPCIBusId(&device, busId) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

bool devicePointer(const void* ptr, int* device) {
  *device = -1;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      *device = attr.device;
      return true;
    case cudaMemoryTypeManaged:
      return true;
    case cudaMemoryTypeHost:  // pinned host memory: kernels reach it when it is mapped at the same address
      return attr.devicePointer == ptr;
    default:
      return false;
  }
}

std::string whyUnreachable(const void* ptr, int device) {
  int owner = -1;
  if (!devicePointer(ptr, &owner)) return "is not device memory";
  if (owner >= 0 && owner != device)
    return "is memory of GPU " + std::to_string(owner) + ", not of GPU " + std::to_string(device);
  return "";
}

ncclResult_t memAlloc(void** ptr, size_t bytes) {
  RelaxedCaptureScope relaxed;
  CHORUS_CUDA_CHECK(cudaMalloc(ptr, bytes));
  CHORUS_INFO(kLogAlloc, "ncclMemAlloc: %zu bytes of device memory at %p", bytes, *ptr);
  return ncclSuccess;
}

// At once, as NCCL does: a caller that frees to make room (a caching
// allocator retrying after out-of-memory) needs the memory back now.
ncclResult_t memFree(void* ptr) {
  RelaxedCaptureScope relaxed;
  CHORUS_CUDA_CHECK(cudaFree(ptr));
  return ncclSuccess;
}

bool gpuDirectRdmaSupported(int device) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, cudaDevAttrGPUDirectRDMASupported, device) == cudaSuccess && value != 0;
}

ncclResult_t allocDeviceBuffer(int device, size_t bytes, std::shared_ptr<void>* keep, void** ptr) {
  DeviceScope scope(device);
  CHORUS_CUDA_CHECK(scope.status());
  RelaxedCaptureScope relaxed;
  void* base = nullptr;
  CHORUS_CUDA_CHECK(cudaMalloc(&base, bytes));
  std::shared_ptr<void> owner(base, [device](void* p) {
    releaseWhenIdle(device, [device, p] {
      DeviceScope s(device);
      RelaxedCaptureScope r;
      (void)cudaFree(p);
    });
  });
  CHORUS_CHECK(zeroDeviceMemory(base, bytes));
  *keep = std::move(owner);
  *ptr = base;
  return ncclSuccess;
}

ncclResult_t mapHostMemory(int device, void* base, size_t bytes, std::shared_ptr<void> owner,
                           std::shared_ptr<void>* keep, void** deviceAddress) {
  DeviceScope scope(device);
  CHORUS_CUDA_CHECK(scope.status());
  RelaxedCaptureScope relaxed;
  CHORUS_CUDA_CHECK(cudaHostRegister(base, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* dptr = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&dptr, base, 0);
  if (err != cudaSuccess) {
    (void)cudaHostUnregister(base);
    CHORUS_CUDA_CHECK(err);
  }
  *deviceAddress = dptr;
  // The release holds its own copy of `owner`: the memory goes after the unmapping.
  *keep = std::shared_ptr<void>(base, [device, owner = std::move(owner)](void* p) {
    releaseWhenIdle(device, [device, p, owner] {
      DeviceScope s(device);
      RelaxedCaptureScope r;
      (void)cudaHostUnregister(p);
    });
  });
  return ncclSuccess;
}

}  // namespace chorus::gpu
