// AVX2 (+F16C) inner loops for the host reduction kernels.
//
// Only the functions in this file are compiled for AVX2 (through the target
// attribute, not a global -mavx2), and everything here has internal linkage, so
// no AVX2 code can be picked up by a caller on a CPU without it; host_reduce.cc
// calls in only after checking the CPU.
//
// Each element type has a "vector view" (VT): how to load a vector of elements
// into compute lanes and store them back, plus the lane arithmetic. Narrow
// floats compute in fp32 lanes, like the scalar functors; their stores round to
// nearest-even exactly like kernels/common/float_types.h (F16C for half, integer
// rounding for bf16, integer rounding plus an fp32 add trick for fp8
// subnormals), so the vector body and the scalar tail agree bit for bit.
// Missing instructions: 8/64-bit integer division (avg) has no vector form
// here and runs the portable loop.
#include "host/host_reduce_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#define CHORUS_AVX2_FN __attribute__((target("avx2,f16c")))
#define CHORUS_AVX2_INLINE __attribute__((target("avx2,f16c"), always_inline)) inline

namespace chorus::host::detail {
namespace {

using u8p = unsigned char*;
using cu8p = const unsigned char*;

// ---- lane arithmetic ----------------------------------------------------------

// fp32 lanes; max/min put a NaN first operand back so NaN wins either way
// (the instruction itself returns the second operand when one is NaN).
struct F32Lanes {
  using V = __m256;
  using DivV = __m256;
  static constexpr size_t kLanes = 8;
  static constexpr bool kHasDiv = true;
  CHORUS_AVX2_INLINE static V add(V a, V b) { return _mm256_add_ps(a, b); }
  CHORUS_AVX2_INLINE static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  CHORUS_AVX2_INLINE static V max(V a, V b) {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  CHORUS_AVX2_INLINE static V min(V a, V b) {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  CHORUS_AVX2_INLINE static V splat(float x) { return _mm256_set1_ps(x); }
  CHORUS_AVX2_INLINE static DivV divisor(int d) { return _mm256_set1_ps(float(d)); }
  CHORUS_AVX2_INLINE static V div(V a, DivV d) { return _mm256_div_ps(a, d); }
};

struct F64Lanes {
  using V = __m256d;
  using DivV = __m256d;
  static constexpr size_t kLanes = 4;
  static constexpr bool kHasDiv = true;
  CHORUS_AVX2_INLINE static V add(V a, V b) { return _mm256_add_pd(a, b); }
  CHORUS_AVX2_INLINE static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  CHORUS_AVX2_INLINE static V max(V a, V b) {
    return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  CHORUS_AVX2_INLINE static V min(V a, V b) {
    return _mm256_blendv_pd(_mm256_min_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  CHORUS_AVX2_INLINE static V splat(double x) { return _mm256_set1_pd(x); }
  CHORUS_AVX2_INLINE static DivV divisor(int d) { return _mm256_set1_pd(double(d)); }
  CHORUS_AVX2_INLINE static V div(V a, DivV d) { return _mm256_div_pd(a, d); }
};

// Integer lanes share loads, stores and the "no division" default.
struct IntLanesBase {
  using V = __m256i;
  using DivV = __m256d;
  static constexpr bool kHasDiv = false;
  CHORUS_AVX2_INLINE static DivV divisor(int d) { return _mm256_set1_pd(double(d)); }
};

template <bool Signed>
struct I8Lanes : IntLanesBase {
  static constexpr size_t kLanes = 32;
  CHORUS_AVX2_INLINE static V add(V a, V b) { return _mm256_add_epi8(a, b); }
  // No 8-bit multiply: multiply even and odd bytes as 16-bit lanes; the low
  // byte of a 16-bit product only depends on the low bytes of its inputs.
  CHORUS_AVX2_INLINE static V mul(V a, V b) {
    const V even = _mm256_mullo_epi16(a, b);
    const V odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)), _mm256_slli_epi16(odd, 8));
  }
  CHORUS_AVX2_INLINE static V max(V a, V b) { return Signed ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b); }
  CHORUS_AVX2_INLINE static V min(V a, V b) { return Signed ? _mm256_min_epi8(a, b) : _mm256_min_epu8(a, b); }
  CHORUS_AVX2_INLINE static V splat(int x) { return _mm256_set1_epi8(char(x)); }
};

// 32-bit division goes through fp64: the correctly rounded quotient of two
// integers below 2^32 truncates to the exact integer quotient.
template <bool Signed>
struct I32Lanes : IntLanesBase {
  static constexpr size_t kLanes = 8;
  static constexpr bool kHasDiv = true;
  CHORUS_AVX2_INLINE static V add(V a, V b) { return _mm256_add_epi32(a, b); }
  CHORUS_AVX2_INLINE static V mul(V a, V b) { return _mm256_mullo_epi32(a, b); }
  CHORUS_AVX2_INLINE static V max(V a, V b) { return Signed ? _mm256_max_epi32(a, b) : _mm256_max_epu32(a, b); }
  CHORUS_AVX2_INLINE static V min(V a, V b) { return Signed ? _mm256_min_epi32(a, b) : _mm256_min_epu32(a, b); }
  CHORUS_AVX2_INLINE static V splat(int64_t x) { return _mm256_set1_epi32(int(uint32_t(x))); }
  CHORUS_AVX2_INLINE static __m128i div4(__m128i x, DivV d) {
    if constexpr (Signed) return _mm256_cvttpd_epi32(_mm256_div_pd(_mm256_cvtepi32_pd(x), d));
    // Unsigned: bias into signed range to convert, truncate in fp64, and bias
    // back after the (now exact) integer conversion.
    const __m128i bias = _mm_set1_epi32(int(0x80000000u));
    const __m256d two31 = _mm256_set1_pd(2147483648.0);
    const __m256d xd = _mm256_add_pd(_mm256_cvtepi32_pd(_mm_xor_si128(x, bias)), two31);
    const __m256d q = _mm256_round_pd(_mm256_div_pd(xd, d), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    return _mm_xor_si128(_mm256_cvttpd_epi32(_mm256_sub_pd(q, two31)), bias);
  }
  CHORUS_AVX2_INLINE static V div(V x, DivV d) {
    return _mm256_set_m128i(div4(_mm256_extracti128_si256(x, 1), d), div4(_mm256_castsi256_si128(x), d));
  }
};

template <bool Signed>
struct I64Lanes : IntLanesBase {
  static constexpr size_t kLanes = 4;
  CHORUS_AVX2_INLINE static V add(V a, V b) { return _mm256_add_epi64(a, b); }
  // Low 64 bits of the product: lo*lo + ((hi*lo + lo*hi) << 32).
  CHORUS_AVX2_INLINE static V mul(V a, V b) {
    const V lo = _mm256_mul_epu32(a, b);
    const V c1 = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b);
    const V c2 = _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(_mm256_add_epi64(c1, c2), 32));
  }
  // a > b, signed or (with sign bits flipped) unsigned.
  CHORUS_AVX2_INLINE static V greater(V a, V b) {
    if constexpr (Signed) return _mm256_cmpgt_epi64(a, b);
    const V flip = _mm256_set1_epi64x(int64_t(0x8000000000000000ull));
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
  }
  CHORUS_AVX2_INLINE static V max(V a, V b) { return _mm256_blendv_epi8(b, a, greater(a, b)); }
  CHORUS_AVX2_INLINE static V min(V a, V b) { return _mm256_blendv_epi8(b, a, greater(b, a)); }
  CHORUS_AVX2_INLINE static V splat(int64_t x) { return _mm256_set1_epi64x(x); }
};

// ---- narrow float stores --------------------------------------------------------

// Packs eight 32-bit lanes holding values < 2^16 into eight uint16.
CHORUS_AVX2_INLINE __m128i pack32to16(__m256i v) {
  return _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

CHORUS_AVX2_INLINE __m256i selectIf(__m256i mask, __m256i yes, __m256i no) { return _mm256_blendv_epi8(no, yes, mask); }

// shiftRoundEven() from float_types.h on 32-bit lanes.
template <int Shift>
CHORUS_AVX2_INLINE __m256i shiftRoundEven(__m256i v) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, Shift), _mm256_set1_epi32(1));
  const __m256i biased = _mm256_add_epi32(_mm256_add_epi32(v, _mm256_set1_epi32((1 << (Shift - 1)) - 1)), lsb);
  return _mm256_srli_epi32(biased, Shift);
}

// fp32 -> fp8 code (sign included) in 32-bit lanes, following
// floatToFp8e4m3/floatToFp8e5m2. Subnormal results come from adding 2^Magic
// to |x|: the fp32 sum then has exactly one unit of the fp8 subnormal spacing
// per ulp, so the hardware's round-to-nearest-even does the rounding.
template <int M, int Bias, uint32_t kMaxFinite, uint32_t kSatCode, uint32_t kInfCode, uint32_t kNanCode>
CHORUS_AVX2_INLINE __m256i encodeFp8(__m256 x) {
  constexpr int kMagicExp = 23 - M + (1 - Bias);  // log2 of the adder: its ulp is 2^(1-Bias-M)
  constexpr uint32_t kMagicBits = uint32_t(127 + kMagicExp) << 23;
  const __m256i u = _mm256_castps_si256(x);
  const __m256i sign = _mm256_srli_epi32(_mm256_and_si256(u, _mm256_set1_epi32(int(0x80000000u))), 24);
  const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i normal = shiftRoundEven<23 - M>(_mm256_sub_epi32(a, _mm256_set1_epi32(int(uint32_t(127 - Bias) << 23))));
  const __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32(int(kMagicBits)));
  const __m256i sub = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic)),
                                       _mm256_set1_epi32(int(kMagicBits)));
  const __m256i minNormal = _mm256_set1_epi32(int(uint32_t(127 - Bias + 1) << 23));
  __m256i r = selectIf(_mm256_cmpgt_epi32(minNormal, a), sub, normal);
  r = selectIf(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(int(kMaxFinite))), _mm256_set1_epi32(int(kSatCode)), r);
  r = selectIf(_mm256_cmpeq_epi32(a, _mm256_set1_epi32(0x7f800000)), _mm256_set1_epi32(int(kInfCode)), r);
  r = selectIf(_mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)), _mm256_set1_epi32(int(kNanCode)), r);
  return _mm256_or_si256(r, sign);
}

CHORUS_AVX2_INLINE void store8Bytes(u8p p, __m256i codes) {
  const __m128i w = pack32to16(codes);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
}

// e4m3 decodes through a 256-entry table (one gather per 8 elements).
struct E4m3Table {
  alignas(64) float value[256];
  E4m3Table() {
    for (int i = 0; i < 256; ++i) value[i] = fp8e4m3ToFloat(fp8e4m3_t{uint8_t(i)});
  }
};

const float* e4m3Table() {
  static const E4m3Table table;
  return table.value;
}

// ---- element views: load/store between memory and lanes ------------------------

template <typename T>
struct View;

template <>
struct View<float> : F32Lanes {
  CHORUS_AVX2_INLINE V load(cu8p p) const { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  CHORUS_AVX2_INLINE void store(u8p p, V v) const { _mm256_storeu_ps(reinterpret_cast<float*>(p), v); }
};

template <>
struct View<double> : F64Lanes {
  CHORUS_AVX2_INLINE V load(cu8p p) const { return _mm256_loadu_pd(reinterpret_cast<const double*>(p)); }
  CHORUS_AVX2_INLINE void store(u8p p, V v) const { _mm256_storeu_pd(reinterpret_cast<double*>(p), v); }
};

template <>
struct View<half_t> : F32Lanes {
  CHORUS_AVX2_INLINE V load(cu8p p) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  CHORUS_AVX2_INLINE void store(u8p p, V v) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
};

template <>
struct View<bf16_t> : F32Lanes {
  CHORUS_AVX2_INLINE V load(cu8p p) const {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  CHORUS_AVX2_INLINE void store(u8p p, V v) const {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i rounded = shiftRoundEven<16>(u);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack32to16(selectIf(isNan, quiet, rounded)));
  }
};

template <>
struct View<fp8e4m3_t> : F32Lanes {
  const float* table = e4m3Table();
  CHORUS_AVX2_INLINE V load(cu8p p) const {
    const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_i32gather_ps(table, idx, 4);
  }
  CHORUS_AVX2_INLINE void store(u8p p, V v) const {
    store8Bytes(p, encodeFp8<3, 7, 0x43e00000u, 0x7eu, 0x7eu, 0x7fu>(v));
  }
};

// e5m2 bytes are the top halves of binary16 values: widen and use F16C.
template <>
struct View<fp8e5m2_t> : F32Lanes {
  CHORUS_AVX2_INLINE V load(cu8p p) const {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
  }
  CHORUS_AVX2_INLINE void store(u8p p, V v) const {
    store8Bytes(p, encodeFp8<2, 15, 0x47600000u, 0x7bu, 0x7cu, 0x7eu>(v));
  }
};

struct IntMemory {
  CHORUS_AVX2_INLINE __m256i load(cu8p p) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  CHORUS_AVX2_INLINE void store(u8p p, __m256i v) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
};

template <> struct View<int8_t> : I8Lanes<true>, IntMemory {};
template <> struct View<uint8_t> : I8Lanes<false>, IntMemory {};
template <> struct View<int32_t> : I32Lanes<true>, IntMemory {};
template <> struct View<uint32_t> : I32Lanes<false>, IntMemory {};
template <> struct View<int64_t> : I64Lanes<true>, IntMemory {};
template <> struct View<uint64_t> : I64Lanes<false>, IntMemory {};

// ---- the op on lanes ------------------------------------------------------------

template <typename T, ReduceKind K>
struct LaneFunc {
  using VT = View<T>;
  using V = typename VT::V;
  V scale{};
  typename VT::DivV divv{};

  CHORUS_AVX2_INLINE explicit LaneFunc(const KernelArgs& args) {
    if constexpr (K == ReduceKind::PreMulSum) {
      scale = VT::splat(ElemTraits<T>::widen(readScalar<T>(args)));
    }
    if constexpr (K == ReduceKind::SumPostDiv && VT::kHasDiv) divv = VT::divisor(args.divisor);
  }
  CHORUS_AVX2_INLINE V pre(V x) const { return VT::mul(x, scale); }
  CHORUS_AVX2_INLINE V post(V x) const { return VT::div(x, divv); }
  CHORUS_AVX2_INLINE V combine(V a, V b) const {
    if constexpr (K == ReduceKind::Prod) return VT::mul(a, b);
    else if constexpr (K == ReduceKind::Max) return VT::max(a, b);
    else if constexpr (K == ReduceKind::Min) return VT::min(a, b);
    else return VT::add(a, b);
  }
};

// ---- kernels ------------------------------------------------------------------------

template <typename T, ReduceKind K>
struct Avx2Reduce {
  template <bool PreA, bool PreB, bool Post>
  struct Kernel {
    CHORUS_AVX2_FN static void run(void* dst, const void* a, const void* b, size_t n, const KernelArgs& args) {
      using VT = View<T>;
      size_t i = 0;
      if constexpr (!Post || VT::kHasDiv) {
        constexpr size_t L = VT::kLanes;
        constexpr size_t kStep = L * sizeof(T);
        const VT io{};
        const LaneFunc<T, K> fn(args);
        auto* d = static_cast<u8p>(dst);
        const auto* x = static_cast<cu8p>(a);
        const auto* y = static_cast<cu8p>(b);
        // Two vectors per iteration keep two independent load/compute chains
        // in flight; the loop is bandwidth bound beyond that.
        for (; i + 2 * L <= n; i += 2 * L) {
          const size_t o = i * sizeof(T);
          auto x0 = io.load(x + o), x1 = io.load(x + o + kStep);
          auto y0 = io.load(y + o), y1 = io.load(y + o + kStep);
          if constexpr (PreA) x0 = fn.pre(x0), x1 = fn.pre(x1);
          if constexpr (PreB) y0 = fn.pre(y0), y1 = fn.pre(y1);
          auto r0 = fn.combine(x0, y0), r1 = fn.combine(x1, y1);
          if constexpr (Post) r0 = fn.post(r0), r1 = fn.post(r1);
          io.store(d + o, r0);
          io.store(d + o + kStep, r1);
        }
      }
      reduceRange<T, K, PreA, PreB, Post>(dst, a, b, i, n, args);
    }
  };
};

template <typename T, ReduceKind K, bool Pre, bool Post>
struct Avx2Transform {
  CHORUS_AVX2_FN static void run(void* dst, const void* src, size_t n, const KernelArgs& args) {
    using VT = View<T>;
    size_t i = 0;
    if constexpr (!Post || VT::kHasDiv) {
      constexpr size_t L = VT::kLanes;
      const VT io{};
      const LaneFunc<T, K> fn(args);
      auto* d = static_cast<u8p>(dst);
      const auto* x = static_cast<cu8p>(src);
      for (; i + L <= n; i += L) {
        auto v = io.load(x + i * sizeof(T));
        if constexpr (Pre) v = fn.pre(v);
        if constexpr (Post) v = fn.post(v);
        io.store(d + i * sizeof(T), v);
      }
    }
    transformRange<T, K, Pre, Post>(dst, src, i, n, args);
  }
};

}  // namespace

ReduceKernel avx2ReduceKernel(ncclDataType_t t, ReduceKind k, bool preA, bool preB, bool post) {
  return dispatchType(t, [&](auto tt) -> ReduceKernel {
    using T = typename decltype(tt)::type;
    return dispatchKind(k, [&](auto kt) -> ReduceKernel {
      constexpr ReduceKind K = decltype(kt)::value;
      return pickReduce<K, Avx2Reduce<T, K>::template Kernel>(preA, preB, post);
    });
  });
}

TransformKernel avx2TransformKernel(ncclDataType_t t, ReduceKind k, bool pre, bool post) {
  return dispatchType(t, [&](auto tt) -> TransformKernel {
    using T = typename decltype(tt)::type;
    if (k == ReduceKind::PreMulSum && pre) return &Avx2Transform<T, ReduceKind::PreMulSum, true, false>::run;
    if (k == ReduceKind::SumPostDiv && post) return &Avx2Transform<T, ReduceKind::SumPostDiv, false, true>::run;
    return nullptr;
  });
}

}  // namespace chorus::host::detail

#else  // not x86-64: no AVX2 kernels; the portable loops handle everything.

namespace chorus::host::detail {
ReduceKernel avx2ReduceKernel(ncclDataType_t, ReduceKind, bool, bool, bool) { return nullptr; }
TransformKernel avx2TransformKernel(ncclDataType_t, ReduceKind, bool, bool) { return nullptr; }
}  // namespace chorus::host::detail

#endif
