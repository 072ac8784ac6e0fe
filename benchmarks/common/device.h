// The few CUDA runtime calls the benchmarks make in GPU mode, behind a header
// without CUDA types so that the shared driver still compiles without the
// CUDA headers. CUDA builds link device_cuda.cc; other builds link
// device_none.cc, where built() is false, count() is 0 and every call fails
// with a message saying the tools were built without CUDA.
//
// Failing calls print "chorus benchmarks: <call>: <CUDA error>" to stderr and
// return ncclUnhandledCudaError, so callers only pass the result on.
#pragma once

#include <cstddef>

#include "nccl.h"

namespace chorus_bench::device {

// True when the tools were built with CUDA.
bool built();
// Visible CUDA devices; 0 without CUDA, a driver or a device.
int count();

// Makes `dev` the calling thread's current device.
ncclResult_t select(int dev);

// A non-blocking stream (no implicit ordering with the legacy default stream).
ncclResult_t streamCreate(cudaStream_t* stream);
void streamDestroy(cudaStream_t stream);
ncclResult_t streamSync(cudaStream_t stream);

// Device memory on the current device, zero-filled through `stream` (never
// the legacy default stream, which would order against other ranks' work).
ncclResult_t alloc(void** ptr, size_t bytes, cudaStream_t stream);
// Frees device memory. cudaFree waits for the whole device, so callers free
// only when no rank on the device can still be waiting for them.
void release(void* ptr);

// Page-locked host memory for fast staging copies; callers fall back to
// plain memory when this fails (no message is printed).
ncclResult_t allocHost(void** ptr, size_t bytes);
void releaseHost(void* ptr);

// Copies between host and device memory, ordered on `stream` and finished
// when they return.
ncclResult_t toDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream);
ncclResult_t toHost(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// Stream capture into a CUDA graph. Capture is thread-local, so threads that
// drive other ranks are not disturbed. endCapture instantiates the graph;
// the returned handle is launched with launchGraph and freed with dropGraph.
using Graph = void*;
ncclResult_t beginCapture(cudaStream_t stream);
ncclResult_t endCapture(cudaStream_t stream, Graph* graph);
ncclResult_t launchGraph(Graph graph, cudaStream_t stream);
void dropGraph(Graph graph);

}  // namespace chorus_bench::device
