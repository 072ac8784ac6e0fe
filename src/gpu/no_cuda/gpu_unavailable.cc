// src/gpu/gpu_runtime.h for builds without CUDA (CHORUS_ENABLE_CUDA=OFF):
// nothing can run on a GPU, and every call that would need one says so.
#include <string>

#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus::gpu {
namespace {
constexpr const char* kNoCuda = "this build of Chorus has no CUDA support (configured with CHORUS_ENABLE_CUDA=OFF)";

ncclResult_t unavailable(const char* what) { return fail(ncclInvalidUsage, "%s: %s", what, kNoCuda); }
}  // namespace

struct CommState {};
void CommStateDeleter::operator()(CommState* state) const { delete state; }

bool built() { return false; }

bool usable(std::string* why) {
  if (why != nullptr) *why = kNoCuda;
  return false;
}

ncclResult_t currentDevice(int* device) {
  *device = -1;
  return unavailable("cudaGetDevice");
}

ncclResult_t selectDevice(int) { return unavailable("cudaSetDevice"); }

std::string pciBusId(int) { return ""; }
int deviceWithBusId(const char*) { return -1; }
uint64_t visibleGpusHash() { return 0; }

bool devicePointer(const void*, int* device) {
  *device = -1;
  return false;
}
std::string whyUnreachable(const void*, int) { return "is not device memory (this build has no CUDA support)"; }

ncclResult_t memAlloc(void**, size_t) { return unavailable("device memory allocation"); }
ncclResult_t memFree(void*) { return unavailable("device memory release"); }

ncclResult_t allocDeviceBuffer(int, size_t, std::shared_ptr<void>*, void**) {
  return unavailable("device memory allocation");
}
bool dmabufSupported(int) { return false; }
bool gpuDirectRdmaSupported(int) { return false; }
ncclResult_t dmabufExport(int, void*, size_t, int* fd, uint64_t*) {
  *fd = -1;
  return unavailable("dma-buf export");
}

ncclResult_t mapHostMemory(int, void*, size_t, std::shared_ptr<void>, std::shared_ptr<void>*, void**) {
  return unavailable("mapping host memory for kernels");
}

ncclResult_t commSetup(ncclComm*) { return unavailable("GPU-mode communicator"); }
void commTeardown(ncclComm*, bool) {}
ncclResult_t commDrain(ncclComm*) { return ncclSuccess; }
ncclResult_t commPollError(ncclComm*) { return ncclSuccess; }
void commSignalAbort(ncclComm*) {}
std::string commStopForGonePeer(ncclComm*, const std::string& why) { return why; }
void spreadVerdict(ncclComm*, const OpMismatchRecord&) {}
void releaseWhenIdle(int, std::function<void()> release) { release(); }
void declareKernelsWaitOnThisThread() {}

ncclResult_t launchPlans(std::span<Plan* const>, std::span<const std::vector<cudaStream_t>>) {
  return unavailable("GPU kernel launch");
}

}  // namespace chorus::gpu
