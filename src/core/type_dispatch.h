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

// Calls f(TypeTag<T>{}) for the element type of `t`; returns a
// value-initialized result for an invalid type.
template <typename F>
auto dispatchType(ncclDataType_t t, F&& f) -> decltype(f(TypeTag<float>{})) {
  switch (t) {
    case ncclInt8:
      return f(TypeTag<int8_t>{});
    case ncclUint8:
      return f(TypeTag<uint8_t>{});
    case ncclInt32:
      return f(TypeTag<int32_t>{});
    case ncclUint32:
      return f(TypeTag<uint32_t>{});
    case ncclInt64:
      return f(TypeTag<int64_t>{});
    case ncclUint64:
      return f(TypeTag<uint64_t>{});
    case ncclFloat16:
      return f(TypeTag<half_t>{});
    case ncclFloat32:
      return f(TypeTag<float>{});
    case ncclFloat64:
      return f(TypeTag<double>{});
    case ncclBfloat16:
      return f(TypeTag<bf16_t>{});
    case ncclFloat8e4m3:
      return f(TypeTag<fp8e4m3_t>{});
    case ncclFloat8e5m2:
      return f(TypeTag<fp8e5m2_t>{});
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
