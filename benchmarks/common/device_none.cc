// device.h for builds without CUDA: no devices, and every call says why it
// cannot work. Memory::init refuses GPU-mode communicators before any of
// these is reached; they fail cleanly all the same.
#include <cstdio>

#include "common/device.h"

namespace chorus_bench::device {
namespace {

ncclResult_t unavailable(const char* what) {
  std::fprintf(stderr, "chorus benchmarks: %s: these tools were built without CUDA support\n", what);
  return ncclInvalidUsage;
}

}  // namespace

bool built() { return false; }
int count() { return 0; }
ncclResult_t select(int) { return unavailable("select a CUDA device"); }
ncclResult_t streamCreate(cudaStream_t* stream) {
  *stream = nullptr;
  return unavailable("create a CUDA stream");
}
void streamDestroy(cudaStream_t) {}
ncclResult_t streamSync(cudaStream_t) { return unavailable("synchronize a CUDA stream"); }
ncclResult_t alloc(void** ptr, size_t, cudaStream_t) {
  *ptr = nullptr;
  return unavailable("allocate device memory");
}
void release(void*) {}
ncclResult_t allocHost(void** ptr, size_t) {
  *ptr = nullptr;
  return ncclInvalidUsage;  // silent: callers fall back to plain memory
}
void releaseHost(void*) {}
ncclResult_t toDevice(void*, const void*, size_t, cudaStream_t) { return unavailable("copy to the device"); }
ncclResult_t toHost(void*, const void*, size_t, cudaStream_t) { return unavailable("copy from the device"); }
ncclResult_t beginCapture(cudaStream_t) { return unavailable("capture a CUDA graph"); }
ncclResult_t endCapture(cudaStream_t, Graph* graph) {
  *graph = nullptr;
  return unavailable("capture a CUDA graph");
}
ncclResult_t launchGraph(Graph, cudaStream_t) { return unavailable("launch a CUDA graph"); }
void dropGraph(Graph) {}

}  // namespace chorus_bench::device
