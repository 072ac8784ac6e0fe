// device.h on the CUDA runtime (CUDA builds only).
#include <cuda_runtime_api.h>

#include <cstdio>

#include "common/device.h"

namespace chorus_bench::device {
namespace {

ncclResult_t check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ncclSuccess;
  std::fprintf(stderr, "chorus benchmarks: %s: %s\n", what, cudaGetErrorString(err));
  return ncclUnhandledCudaError;
}

}  // namespace

bool built() { return true; }

int count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // "no device" must not linger as the thread's last error
    return 0;
  }
  return n;
}

ncclResult_t select(int dev) { return check(cudaSetDevice(dev), "cudaSetDevice"); }

ncclResult_t streamCreate(cudaStream_t* stream) {
  return check(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

void streamDestroy(cudaStream_t stream) {
  if (stream) cudaStreamDestroy(stream);
}

ncclResult_t streamSync(cudaStream_t stream) { return check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }

ncclResult_t alloc(void** ptr, size_t bytes, cudaStream_t stream) {
  ncclResult_t res = check(cudaMalloc(ptr, bytes), "cudaMalloc");
  if (res != ncclSuccess) return res;
  res = check(cudaMemsetAsync(*ptr, 0, bytes, stream), "cudaMemsetAsync");
  if (res == ncclSuccess) res = streamSync(stream);
  return res;
}

void release(void* ptr) {
  if (ptr) cudaFree(ptr);
}

ncclResult_t allocHost(void** ptr, size_t bytes) {
  if (cudaHostAlloc(ptr, bytes, cudaHostAllocPortable) == cudaSuccess) return ncclSuccess;
  cudaGetLastError();
  *ptr = nullptr;
  return ncclUnhandledCudaError;
}

void releaseHost(void* ptr) {
  if (ptr) cudaFreeHost(ptr);
}

ncclResult_t toDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  ncclResult_t res =
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (to device)");
  return res == ncclSuccess ? streamSync(stream) : res;
}

ncclResult_t toHost(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  ncclResult_t res =
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (to host)");
  return res == ncclSuccess ? streamSync(stream) : res;
}

ncclResult_t beginCapture(cudaStream_t stream) {
  return check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
}

ncclResult_t endCapture(cudaStream_t stream, Graph* graph) {
  *graph = nullptr;
  cudaGraph_t g = nullptr;
  ncclResult_t res = check(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
  if (res != ncclSuccess) return res;
  cudaGraphExec_t exec = nullptr;
  res = check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(g);  // the executable graph keeps what it needs
  if (res == ncclSuccess) *graph = exec;
  return res;
}

ncclResult_t launchGraph(Graph graph, cudaStream_t stream) {
  return check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream), "cudaGraphLaunch");
}

void dropGraph(Graph graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace chorus_bench::device
