// Whether the compressed wire formats serve a (datatype, reduction) pair:
// the run-time form of wire::kCompresses (kernels/common/wire_reduce.h), for
// the API's argument checks and the GPU launch checks.
#pragma once

#include "core/type_dispatch.h"
#include "kernels/common/wire_reduce.h"

namespace chorus {

inline bool wireCompresses(ncclDataType_t t, ReduceKind k) {
  return dispatchType(t, [&](auto type) {
    return dispatchKind(
        k, [&](auto kind) { return wire::kCompresses<typename decltype(type)::type, decltype(kind)::value>; });
  });
}

}  // namespace chorus
