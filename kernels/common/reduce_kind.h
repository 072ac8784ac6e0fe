// The reduction a step performs, as a small enum both executors dispatch on:
// the host loops (src/host/host_reduce*.cc) and the CUDA kernels
// (kernels/device/) map each value to one functor of reduce_ops.h.
#pragma once

#include <cstdint>

namespace chorus {

enum class ReduceKind : uint8_t { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };
inline constexpr int kNumReduceKinds = 6;

}  // namespace chorus
