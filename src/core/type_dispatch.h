// From runtime values to compile-time template arguments: the element type
// of an ncclDataType_t and a ReduceKind. The host reductions, the host wire
// loops and the runtime forms of compile-time rules (wire_support.h) call
// these, so the list of types is written once.
#pragma once

#include <type_traits>

#include "kernels/common/float_types.h"
#include "kernels/common/reduce_kind.h"
#include "nccl.h"

namespace chorus {

template <typename T>
struct TypeTag {
  using type = T;
};

// The element type of each ncclDataType_t: the one table of that mapping.
// dispatchType below and the kernel instantiations that
// kernels/generate_instances.py writes (`ElemOf<ncclFloat32>`) both use it.
template <ncclDataType_t D>
struct ElemOfType;
#define CHORUS_ELEM_OF(D, T) \
  template <>                \
  struct ElemOfType<D> {     \
    using type = T;          \
  };
CHORUS_ELEM_OF(ncclInt8, int8_t)
CHORUS_ELEM_OF(ncclUint8, uint8_t)
CHORUS_ELEM_OF(ncclInt32, int32_t)
CHORUS_ELEM_OF(ncclUint32, uint32_t)
CHORUS_ELEM_OF(ncclInt64, int64_t)
CHORUS_ELEM_OF(ncclUint64, uint64_t)
CHORUS_ELEM_OF(ncclFloat16, half_t)
CHORUS_ELEM_OF(ncclFloat32, float)
CHORUS_ELEM_OF(ncclFloat64, double)
CHORUS_ELEM_OF(ncclBfloat16, bf16_t)
CHORUS_ELEM_OF(ncclFloat8e4m3, fp8e4m3_t)
CHORUS_ELEM_OF(ncclFloat8e5m2, fp8e5m2_t)
#undef CHORUS_ELEM_OF
template <ncclDataType_t D>
using ElemOf = typename ElemOfType<D>::type;

// Calls f(TypeTag<T>{}) for the element type of `t`; returns a
// value-initialized result for an invalid type.
template <typename F>
auto dispatchType(ncclDataType_t t, F&& f) -> decltype(f(TypeTag<float>{})) {
  switch (t) {
#define CHORUS_TYPE_CASE(D) \
  case (D):                 \
    return f(TypeTag<ElemOf<(D)>>{});
    CHORUS_TYPE_CASE(ncclInt8)
    CHORUS_TYPE_CASE(ncclUint8)
    CHORUS_TYPE_CASE(ncclInt32)
    CHORUS_TYPE_CASE(ncclUint32)
    CHORUS_TYPE_CASE(ncclInt64)
    CHORUS_TYPE_CASE(ncclUint64)
    CHORUS_TYPE_CASE(ncclFloat16)
    CHORUS_TYPE_CASE(ncclFloat32)
    CHORUS_TYPE_CASE(ncclFloat64)
    CHORUS_TYPE_CASE(ncclBfloat16)
    CHORUS_TYPE_CASE(ncclFloat8e4m3)
    CHORUS_TYPE_CASE(ncclFloat8e5m2)
#undef CHORUS_TYPE_CASE
    default:
      return {};
  }
}

template <ReduceKind K>
using KindTag = std::integral_constant<ReduceKind, K>;

// Calls f(KindTag<K>{}) for `k`; a value-initialized result for an invalid
// kind.
template <typename F>
auto dispatchKind(ReduceKind k, F&& f) -> decltype(f(KindTag<ReduceKind::Sum>{})) {
  switch (k) {
    case ReduceKind::Sum:
      return f(KindTag<ReduceKind::Sum>{});
    case ReduceKind::Prod:
      return f(KindTag<ReduceKind::Prod>{});
    case ReduceKind::Max:
      return f(KindTag<ReduceKind::Max>{});
    case ReduceKind::Min:
      return f(KindTag<ReduceKind::Min>{});
    case ReduceKind::PreMulSum:
      return f(KindTag<ReduceKind::PreMulSum>{});
    case ReduceKind::SumPostDiv:
      return f(KindTag<ReduceKind::SumPostDiv>{});
  }
  return {};
}

}  // namespace chorus
