// reduce_kernel_perf: bandwidth of the standalone reduction kernel (two
// inputs, one output) next to a device-to-device cudaMemcpy in the same run.
//
//   reduce_kernel_perf [-b BYTES] [-n ITERS] [-w WARMUP]   (default 1 GiB, 20, 5)
//
// Bandwidth counts the bytes each operation must move through HBM: a copy
// reads and writes its size (2 x), the reduction reads two inputs and writes
// one (3 x). Each figure is the median over ITERS timed launches.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "benchmarks/gpu/gpu_timing.h"
#include "kernels/launch.h"

int main(int argc, char** argv) {
  size_t bytes = size_t(1) << 30;
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-b"))
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "-n"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-w"))
      warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [-b BYTES] [-n ITERS] [-w WARMUP]\n", argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("reduce_kernel_perf: SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  void *a = nullptr, *b = nullptr, *d = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMalloc(&d, bytes));
  CHECK_CUDA(cudaMemset(a, 0, bytes));
  CHECK_CUDA(cudaMemset(b, 0, bytes));

  const double copyMs = chorus::bench::medianMs(
      iters, warmup, [&] { CHECK_CUDA(cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice)); });
  const double copyGBs = 2.0 * bytes / (copyMs * 1e6);
  std::printf("# device: %s, %d SMs; buffer %zu bytes; median of %d\n", prop.name, prop.multiProcessorCount, bytes,
              iters);
  std::printf("%-22s %10s %12s %10s\n", "operation", "time(ms)", "HBM GB/s", "vs copy");
  std::printf("%-22s %10.3f %12.1f %10.2f\n", "memcpy D2D", copyMs, copyGBs, 1.0);
  struct Item {
    const char* name;
    ncclDataType_t type;
    size_t esz;
  } items[] = {{"reduce sum fp32", ncclFloat32, 4}, {"reduce sum bf16", ncclBfloat16, 2}};
  int rc = 0;
  for (const auto& it : items) {
    if (!chorus::dev::kernelCompiled(it.type, chorus::ReduceKind::Sum)) {
      std::printf("%-22s %10s (filtered out of this build)\n", it.name, "-");
      continue;
    }
    chorus::dev::ReduceLaunch L;
    L.type = it.type;
    L.kind = chorus::ReduceKind::Sum;
    L.dst = d;
    L.a = a;
    L.b = b;
    L.count = bytes / it.esz;
    const double ms =
        chorus::bench::medianMs(iters, warmup, [&] { CHECK_CUDA(chorus::dev::launchReduce(L, nullptr)); });
    const double gbs = 3.0 * bytes / (ms * 1e6);
    std::printf("%-22s %10.3f %12.1f %10.2f\n", it.name, ms, gbs, gbs / copyGBs);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  return rc;
}
