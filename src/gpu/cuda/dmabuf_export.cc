// Exporting device memory as a dma-buf file descriptor, for network backends
// that register GPU memory through regMrDmaBuf. The driver call is reached
// through the runtime's entry-point lookup, so the library does not link
// libcuda itself; a driver without it means "not supported".
#include <unistd.h>

#include <cstdint>

#include "core/result.h"
#include "gpu/cuda/cuda_util.h"
#include "gpu/gpu_runtime.h"

namespace chorus::gpu {
namespace {

// The driver API's values (cuda.h): device attribute and handle type.
constexpr int kAttrDmaBufSupported = 124;
constexpr int kRangeHandleDmaBufFd = 1;

using DeviceGetAttributeFn = int (*)(int* value, int attribute, int device);
using GetHandleForRangeFn = int (*)(void* handle, unsigned long long dptr, size_t size, int type,
                                    unsigned long long flags);

}  // namespace

bool dmabufSupported(int device) {
  static const auto getAttribute = driverCall<DeviceGetAttributeFn>("cuDeviceGetAttribute");
  static const auto getHandle = driverCall<GetHandleForRangeFn>("cuMemGetHandleForAddressRange");
  int value = 0;
  return getAttribute != nullptr && getHandle != nullptr && getAttribute(&value, kAttrDmaBufSupported, device) == 0 &&
         value != 0;
}

// Runs on the device that owns `ptr` (the driver resolves the range in the
// current context; the caller's may be another GPU's, or none).
ncclResult_t dmabufExport(int device, void* ptr, size_t bytes, int* fd, uint64_t* offset) {
  static const auto getHandle = driverCall<GetHandleForRangeFn>("cuMemGetHandleForAddressRange");
  *fd = -1;
  *offset = 0;
  DeviceScope scope(device);
  CHORUS_CUDA_CHECK(scope.status());
  if (getHandle == nullptr)
    return fail(ncclSystemError, "dma-buf export: the CUDA driver has no cuMemGetHandleForAddressRange");
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t base = addr & ~(page - 1);
  const size_t span = ((addr + bytes - base) + page - 1) & ~(page - 1);
  int handle = -1;
  const int err = getHandle(&handle, base, span, kRangeHandleDmaBufFd, 0);
  if (err != 0 || handle < 0)
    return fail(ncclSystemError, "dma-buf export of %zu bytes at %p failed (CUDA driver error %d)", bytes, ptr, err);
  *fd = handle;
  *offset = addr - base;
  return ncclSuccess;
}

}  // namespace chorus::gpu
