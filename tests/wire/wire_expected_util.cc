#include <cmath>
#include <type_traits>

#include "wire/wire_expected.h"

namespace chorus::test {
namespace {

// Element type <-> accumulation type, independent of kernels/common/reduce_ops.h
// (only the scalar conversions of float_types.h are shared).
template <typename T>
struct Acc {
  using type = std::conditional_t<std::is_integral_v<T>, T, T>;
  static type widen(T v) { return v; }
  static T narrow(type v) { return v; }
};
template <>
struct Acc<half_t> {
  using type = float;
  static float widen(half_t v) { return halfToFloat(v); }
  static half_t narrow(float v) { return floatToHalf(v); }
};
template <>
struct Acc<bf16_t> {
  using type = float;
  static float widen(bf16_t v) { return bf16ToFloat(v); }
  static bf16_t narrow(float v) { return floatToBf16(v); }
};
template <>
struct Acc<fp8e4m3_t> {
  using type = float;
  static float widen(fp8e4m3_t v) { return fp8e4m3ToFloat(v); }
  static fp8e4m3_t narrow(float v) { return floatToFp8e4m3(v); }
};
template <>
struct Acc<fp8e5m2_t> {
  using type = float;
  static float widen(fp8e5m2_t v) { return fp8e5m2ToFloat(v); }
  static fp8e5m2_t narrow(float v) { return floatToFp8e5m2(v); }
};

template <typename T>
uint64_t bitsOf(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <typename T>
T fromBits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

// A value of rank r, element i, in T: inexact floats of mixed magnitude; for
// products, values near 1 so results stay finite for most types.
template <typename T>
T input(DetOp op, int r, size_t i) {
  const uint64_t h = (uint64_t(r) * 2654435761u + i * 40503u + 977) % 1000003u;
  if constexpr (std::is_integral_v<T>) {
    if (op == DetOp::Prod) return T(int64_t(h % 7) - 3);
    return T(int64_t(h * 2862933555777941757ull >> 7));
  } else {
    using A = typename Acc<T>::type;
    const bool narrow8 = sizeof(T) == 1;
    A v = A(int64_t(h % 2001) - 1000) / A(3.0);
    if (op == DetOp::Prod)
      v = A(1.0) + v / A(narrow8 ? 4000.0 : 3000.0);
    else if (narrow8)
      v = v / A(16.0);
    else
      v = v * A(std::ldexp(1.0, int(h % 9) - 4));
    return Acc<T>::narrow(v);
  }
}

template <typename T>
T scalar(int r) {
  if constexpr (std::is_integral_v<T>) {
    return T(r + 2);
  } else {
    return Acc<T>::narrow(typename Acc<T>::type(1.0) / typename Acc<T>::type(r + 3) + typename Acc<T>::type(0.5));
  }
}

template <typename C>
C wrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return C(U(U(a) + U(b)));
  } else {
    return a + b;
  }
}
template <typename C>
C wrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return C(U(U(std::make_unsigned_t<C>(a)) * U(std::make_unsigned_t<C>(b))));
  } else {
    return a * b;
  }
}

template <typename T>
uint64_t expected(DetOp op, int n, size_t i) {
  using A = typename Acc<T>::type;
  A acc{};
  for (int r = 0; r < n; ++r) {
    A v = Acc<T>::widen(input<T>(op, r, i));
    if (op == DetOp::PreMul) v = wrapMul(v, Acc<T>::widen(scalar<T>(r)));
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
      case DetOp::Prod:
        acc = wrapMul(acc, v);
        break;
      case DetOp::Max:
        acc = acc > v ? acc : v;
        break;
      case DetOp::Min:
        acc = acc < v ? acc : v;
        break;
      default:
        acc = wrapAdd(acc, v);
    }
  }
  if (op == DetOp::Avg) {
    if constexpr (std::is_integral_v<A>) {
      using W =
          std::conditional_t<(sizeof(A) > sizeof(int)), A, std::conditional_t<std::is_signed_v<A>, int, unsigned>>;
      acc = A(W(acc) / W(n));
    } else {
      acc = acc / A(n);
    }
  }
  return bitsOf(Acc<T>::narrow(acc));
}

template <typename F>
uint64_t dispatch(ncclDataType_t t, F&& f) {
  switch (t) {
    case ncclInt8:
      return f(int8_t{});
    case ncclUint8:
      return f(uint8_t{});
    case ncclInt32:
      return f(int32_t{});
    case ncclUint32:
      return f(uint32_t{});
    case ncclInt64:
      return f(int64_t{});
    case ncclUint64:
      return f(uint64_t{});
    case ncclFloat16:
      return f(half_t{});
    case ncclFloat32:
      return f(float{});
    case ncclFloat64:
      return f(double{});
    case ncclBfloat16:
      return f(bf16_t{});
    case ncclFloat8e4m3:
      return f(fp8e4m3_t{});
    case ncclFloat8e5m2:
      return f(fp8e5m2_t{});
    default:
      return 0;
  }
}

}  // namespace

const char* detOpName(DetOp op) {
  switch (op) {
    case DetOp::Sum:
      return "sum";
    case DetOp::Prod:
      return "prod";
    case DetOp::Max:
      return "max";
    case DetOp::Min:
      return "min";
    case DetOp::Avg:
      return "avg";
    case DetOp::PreMul:
      return "premulsum";
  }
  return "?";
}

const std::vector<ncclDataType_t>& detTypes() {
  static const std::vector<ncclDataType_t> t = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                                ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                                ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return t;
}

size_t detTypeSize(ncclDataType_t t) {
  return dispatch(t, [](auto v) { return uint64_t(sizeof(v)); });
}

uint64_t detInput(ncclDataType_t t, DetOp op, int rank, size_t i) {
  return dispatch(t, [&](auto v) { return bitsOf(input<decltype(v)>(op, rank, i)); });
}

uint64_t detScalar(ncclDataType_t t, int rank) {
  return dispatch(t, [&](auto v) { return bitsOf(scalar<decltype(v)>(rank)); });
}

uint64_t detExpected(ncclDataType_t t, DetOp op, int nranks, size_t i) {
  return dispatch(t, [&](auto v) { return expected<decltype(v)>(op, nranks, i); });
}

}  // namespace chorus::test
