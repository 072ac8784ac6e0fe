// CUDA's device built-ins for the CPU, so the lane and wire kernels
// (kernels/colls/) run unchanged on CPU threads in the tests of this folder.
// Include this before any kernel header, in a file that includes no CUDA
// header (sim_kernels.cc), and compile it with CHORUS_KERNEL_SIM defined.
//
// How a launch runs (sim_runtime.cc): one CPU thread per thread block, and
// the block's CUDA threads as fibers on it (ucontext), switched at
// __syncthreads() and whenever a spin loop reads the clock (the kernels'
// Waiter does every 1024 spins). So `__shared__` variables are thread_local
// statics (one per CPU thread = one per block), and blocks of a launch and
// launches of several ranks run concurrently, as the kernels require.
//
// What this checks beyond the results: every thread of a block must reach
// the same __syncthreads() (same file and line), and no thread may have
// exited while others wait at one; either is recorded as a fault.
// What it cannot check: the GPU's memory model (L1 coherence, fences across
// PCIe), timing, and the vectorized loads' hardware behaviour; those need
// the device check (tests/gpu/device_check.sh).
#pragma once

#if !defined(CHORUS_KERNEL_SIM)
#error "cuda_sim.h is for the CPU build of the kernels (CHORUS_KERNEL_SIM)"
#endif

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace chorus::sim {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

// The calling simulated thread's index in its block; its block's index and size.
const Dim3& threadIndex();
extern thread_local Dim3 blockIndex;
extern thread_local Dim3 blockSize;

// __syncthreads(): waits until every live thread of the block arrived at the
// same call site.
void syncThreads(const char* file, int line);

// Nanoseconds of a steady clock; lets the block's other threads (and other
// CPU threads) run first, since kernels read the clock inside spin loops.
uint64_t clockNs();

// Runs `body` as `threads` CUDA threads in each of `blocks` blocks and waits
// for all of them. Returns the faults found (empty: none).
std::vector<std::string> launch(int blocks, int threads, const std::function<void()>& body);

}  // namespace chorus::sim

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static thread_local
#define threadIdx (::chorus::sim::threadIndex())
#define blockIdx (::chorus::sim::blockIndex)
#define blockDim (::chorus::sim::blockSize)
#define __syncthreads() ::chorus::sim::syncThreads(__FILE__, __LINE__)

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// An L1-bypassing load is a plain load here: the caller acquired the data first.
template <typename T>
inline T __ldcg(const T* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

inline int atomicCAS(int* address, int compare, int value) {
  std::atomic_ref<int>(*address).compare_exchange_strong(compare, value);
  return compare;
}

inline int atomicExch(int* address, int value) { return std::atomic_ref<int>(*address).exchange(value); }
