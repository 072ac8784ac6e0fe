// Dispatch for the host reduction kernels and the portable (any CPU) loops.
// Each call resolves (type, kind, flags) to one specialized loop, preferring
// the AVX2 one when the CPU supports it, so no per-element branching remains.
#include "host/host_reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstring>

#include "core/log.h"
#include "host/host_reduce_kernels.h"

namespace chorus {

namespace host {
namespace detail {
namespace {

template <typename T, ReduceKind K>
struct PortableReduce {
  template <bool PreA, bool PreB, bool Post>
  struct Kernel {
    static void run(void* dst, const void* a, const void* b, size_t n, const KernelArgs& args) {
      reduceRange<T, K, PreA, PreB, Post>(dst, a, b, 0, n, args);
    }
  };
};

template <typename T, ReduceKind K, bool Pre, bool Post>
struct PortableTransform {
  static void run(void* dst, const void* src, size_t n, const KernelArgs& args) {
    transformRange<T, K, Pre, Post>(dst, src, 0, n, args);
  }
};

}  // namespace

ReduceKernel portableReduceKernel(ncclDataType_t t, ReduceKind k, bool preA, bool preB, bool post) {
  return dispatchType(t, [&](auto tt) -> ReduceKernel {
    using T = typename decltype(tt)::type;
    return dispatchKind(k, [&](auto kt) -> ReduceKernel {
      constexpr ReduceKind K = decltype(kt)::value;
      return pickReduce<K, PortableReduce<T, K>::template Kernel>(preA, preB, post);
    });
  });
}

TransformKernel portableTransformKernel(ncclDataType_t t, ReduceKind k, bool pre, bool post) {
  return dispatchType(t, [&](auto tt) -> TransformKernel {
    using T = typename decltype(tt)::type;
    if (k == ReduceKind::PreMulSum && pre) return &PortableTransform<T, ReduceKind::PreMulSum, true, false>::run;
    if (k == ReduceKind::SumPostDiv && post) return &PortableTransform<T, ReduceKind::SumPostDiv, false, true>::run;
    return nullptr;
  });
}

}  // namespace detail

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// F16C from CPUID leaf 1 (ECX bit 29): clang before 16 does not know "f16c"
// as a __builtin_cpu_supports feature. (AVX2's check there also asks the OS
// whether it saves the AVX registers, which F16C needs too.)
bool cpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

SimdLevel detectSimd() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();  // may run before libgcc's own constructor
  if (__builtin_cpu_supports("avx2") && cpuHasF16c()) return SimdLevel::Avx2;
#endif
  return SimdLevel::Portable;
}

std::atomic<SimdLevel>& activeLevel() {
  static std::atomic<SimdLevel> level{detectedSimdLevel()};
  return level;
}

bool useAvx2() { return activeLevel().load(std::memory_order_relaxed) == SimdLevel::Avx2; }

// Drops flags that are identities for the kind, so equal work maps to one loop.
void normalizeFlags(ReduceKind k, bool& preA, bool& preB, bool& post) {
  if (k != ReduceKind::PreMulSum) preA = preB = false;
  if (k != ReduceKind::SumPostDiv) post = false;
}

detail::KernelArgs kernelArgs(const ReduceSpec& spec) {
  // A divisor below 1 is a caller bug; dividing by 1 keeps it from crashing.
  return detail::KernelArgs{spec.scalar, spec.divisor >= 1 ? spec.divisor : 1};
}

}  // namespace

SimdLevel detectedSimdLevel() {
  static const SimdLevel level = detectSimd();
  return level;
}

SimdLevel activeSimdLevel() { return activeLevel().load(std::memory_order_relaxed); }

SimdLevel setSimdLevel(SimdLevel level) {
  if (level > detectedSimdLevel()) level = detectedSimdLevel();
  return activeLevel().exchange(level);
}

void reduce(const ReduceSpec& spec, void* dst, const void* a, bool preA, const void* b, bool preB, size_t n,
            bool applyPost) {
  if (n == 0) return;
  normalizeFlags(spec.kind, preA, preB, applyPost);
  detail::ReduceKernel kernel = nullptr;
  if (useAvx2()) kernel = detail::avx2ReduceKernel(spec.type, spec.kind, preA, preB, applyPost);
  if (kernel == nullptr) kernel = detail::portableReduceKernel(spec.type, spec.kind, preA, preB, applyPost);
  if (kernel == nullptr) {
    CHORUS_WARN(kLogColl, "host reduce: invalid datatype %d or op kind %d", int(spec.type), int(spec.kind));
    return;
  }
  kernel(dst, a, b, n, kernelArgs(spec));
}

void transform(const ReduceSpec& spec, void* dst, const void* src, bool pre, size_t n, bool applyPost) {
  if (n == 0) return;
  bool unused = false;
  normalizeFlags(spec.kind, pre, unused, applyPost);
  detail::TransformKernel kernel = nullptr;
  if (useAvx2()) kernel = detail::avx2TransformKernel(spec.type, spec.kind, pre, applyPost);
  if (kernel == nullptr) kernel = detail::portableTransformKernel(spec.type, spec.kind, pre, applyPost);
  if (kernel != nullptr) {
    kernel(dst, src, n, kernelArgs(spec));
    return;
  }
  const size_t size = typeSize(spec.type);
  if (size == 0) {
    CHORUS_WARN(kLogColl, "host transform: invalid datatype %d", int(spec.type));
    return;
  }
  if (dst != src) std::memcpy(dst, src, n * size);
}

}  // namespace host
}  // namespace chorus
