// Throughput of host::reduce for the all-reduce hot path, next to memcpy as
// the bandwidth yardstick. "bytes_per_second" counts the payload (one buffer's
// bytes per call); the "traffic" counter adds up every byte read and written
// (2 reads + 1 write for reduce, 1 + 1 for memcpy), which is what memory
// bandwidth limits.
//   chorus_host_reduce_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "host/host_reduce.h"
#include "kernels/common/float_types.h"

namespace {

constexpr size_t kBytes = size_t(64) << 20;

void setCounters(benchmark::State& state, double trafficPerByte) {
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes));
  state.counters["traffic"] =
      benchmark::Counter(double(state.iterations()) * double(kBytes) * trafficPerByte, benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1024);
}

template <typename T>
void BM_Reduce(benchmark::State& state, ncclDataType_t type, chorus::host::SimdLevel level) {
  const chorus::host::SimdLevel previous = chorus::host::setSimdLevel(level);
  if (chorus::host::activeSimdLevel() != level) {
    state.SkipWithError("SIMD level not available");
    chorus::host::setSimdLevel(previous);
    return;
  }
  const size_t n = kBytes / sizeof(T);
  std::vector<T> a(n), b(n), d(n);
  // Small finite values so nothing degenerates into NaN/inf slow paths.
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, chorus::bf16_t>) {
      a[i] = chorus::floatToBf16(float(i % 100)), b[i] = chorus::floatToBf16(1.0f);
    } else {
      a[i] = T(i % 100), b[i] = T(1);
    }
  }
  const chorus::ReduceSpec spec{type, chorus::ReduceKind::Sum, nullptr, 1};
  for (auto _ : state) {
    chorus::host::reduce(spec, d.data(), a.data(), false, b.data(), false, n, false);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  setCounters(state, 3.0);
  chorus::host::setSimdLevel(previous);
}

void BM_Memcpy(benchmark::State& state) {
  std::vector<char> src(kBytes, 1), dst(kBytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  setCounters(state, 2.0);
}

using chorus::host::SimdLevel;
void BM_FloatSum(benchmark::State& state, SimdLevel level) { BM_Reduce<float>(state, ncclFloat32, level); }
void BM_Bf16Sum(benchmark::State& state, SimdLevel level) { BM_Reduce<chorus::bf16_t>(state, ncclBfloat16, level); }

BENCHMARK(BM_Memcpy)->Name("memcpy/64MiB")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FloatSum, avx2, SimdLevel::Avx2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_FloatSum, portable, SimdLevel::Portable)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Bf16Sum, avx2, SimdLevel::Avx2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Bf16Sum, portable, SimdLevel::Portable)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
