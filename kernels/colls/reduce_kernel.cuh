// The standalone reduction kernel: two device buffers in, one out, over the
// whole grid. It is the building block the GPU executor uses to combine
// buffers outside a pipeline, and the kernel whose bandwidth docs/performance.md
// compares with a device-to-device copy.
#pragma once

#include "kernels/launch.h"
#include "kernels/primitives/elementwise.cuh"
#include "kernels/primitives/functor_of.cuh"

namespace chorus::dev {

inline constexpr int kReduceThreads = 512;

template <typename T, ReduceKind K, bool PreA, bool PreB, bool Post>
__global__ void __launch_bounds__(kReduceThreads) reduceKernel(ReduceLaunch args) {
  const auto fn = FunctorOf<T, K>::make(args.scalar, args.divisor);
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  T* dst = static_cast<T*>(args.dst);
  const T* a = static_cast<const T*>(args.a);
  const T* b = static_cast<const T*>(args.b);
  if (b != nullptr)
    combineRange<PreA, PreB, Post, false, false, true>(fn, dst, a, b, args.count, first, stride);
  else
    combineRange<PreA, PreB, Post, false, false, false>(fn, dst, a, b, args.count, first, stride);
}

int reduceGridBlocks(const ReduceLaunch& args, size_t elemBytes);

template <typename T, ReduceKind K, bool PreA, bool PreB, bool Post>
cudaError_t launchReduceAs(const ReduceLaunch& args, cudaStream_t stream) {
  if (args.count == 0) return cudaSuccess;
  const int blocks = reduceGridBlocks(args, sizeof(T));
  reduceKernel<T, K, PreA, PreB, Post><<<blocks, kReduceThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

// Picks the flag instance. Flags that do not apply to K are ignored (they are
// identities for that reduction), which keeps the instance count small.
template <typename T, ReduceKind K>
cudaError_t launchReduceKind(const ReduceLaunch& a, cudaStream_t s) {
  if constexpr (K == ReduceKind::PreMulSum) {
    if (a.preA)
      return a.preB ? launchReduceAs<T, K, true, true, false>(a, s) : launchReduceAs<T, K, true, false, false>(a, s);
    return a.preB ? launchReduceAs<T, K, false, true, false>(a, s) : launchReduceAs<T, K, false, false, false>(a, s);
  } else if constexpr (K == ReduceKind::SumPostDiv) {
    return a.post ? launchReduceAs<T, K, false, false, true>(a, s) : launchReduceAs<T, K, false, false, false>(a, s);
  } else {
    return launchReduceAs<T, K, false, false, false>(a, s);
  }
}

}  // namespace chorus::dev
