#include "core/redop_table.h"

#include <cstring>
#include <type_traits>

#include "core/result.h"
#include "core/type_dispatch.h"
#include "kernels/common/reduce_ops.h"

namespace chorus {
namespace {

// The bits of `x` in floating-point type `type` (rounded from float, as NCCL
// rounds its scalars; double keeps `x`); false for other types.
bool floatBits(ncclDataType_t type, double x, uint64_t* bits) {
  return dispatchType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      return false;
    } else if constexpr (std::is_same_v<T, double>) {
      std::memcpy(bits, &x, sizeof(x));
      return true;
    } else {
      const T v = ElemTraits<T>::narrow(static_cast<float>(x));
      std::memcpy(bits, &v, sizeof(v));
      return true;
    }
  });
}

}  // namespace

void RedOpTable::averageByPreMultiply(int nranks, ReduceSpec* spec) const {
  if (spec->kind != ReduceKind::SumPostDiv || nranks < 1) return;
  uint64_t probe = 0;
  if (!floatBits(spec->type, 1.0, &probe)) return;  // integers: the sum divided once, truncated
  std::call_once(averageOnce_, [this, nranks] {
    for (int t = 0; t < ncclNumTypes; ++t)
      (void)floatBits(static_cast<ncclDataType_t>(t), 1.0 / nranks, &averageScalar_[t]);
  });
  spec->kind = ReduceKind::PreMulSum;
  spec->scalar = &averageScalar_[spec->type];
  spec->scalarOnHost = true;
  spec->divisor = 1;
  spec->average = true;
}

const uint64_t* RedOpTable::keptImmediate(ncclDataType_t type, const void* scalar) {
  uint64_t bits = 0;
  std::memcpy(&bits, scalar, typeSize(type));
  std::unique_ptr<uint64_t>& kept = immediates_[{static_cast<int>(type), bits}];
  if (kept == nullptr) kept = std::make_unique<uint64_t>(bits);
  return kept.get();
}

ncclResult_t RedOpTable::create(ncclDataType_t type, const void* scalar, ncclScalarResidence_t residence,
                                ncclRedOp_t* op) {
  if (typeSize(type) == 0) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d", type);
  if (scalar == nullptr) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: scalar is NULL");
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d", residence);
  std::lock_guard<std::mutex> lock(mutex_);
  Entry e;
  e.live = true;
  e.type = type;
  e.onHost = residence == ncclScalarHostImmediate;
  e.scalar = e.onHost ? keptImmediate(type, scalar) : scalar;
  int idx = static_cast<int>(entries_.size());
  if (!freeSlots_.empty()) {
    idx = freeSlots_.back();
    freeSlots_.pop_back();
    entries_[static_cast<size_t>(idx)] = e;
  } else {
    entries_.push_back(e);
  }
  *op = static_cast<ncclRedOp_t>(ncclNumOps + idx);
  return ncclSuccess;
}

ncclResult_t RedOpTable::destroy(ncclRedOp_t op) {
  std::lock_guard<std::mutex> lock(mutex_);
  int idx = static_cast<int>(op) - ncclNumOps;
  if (op < ncclNumOps) return fail(ncclInvalidArgument, "ncclRedOpDestroy: %d is a built-in operator", op);
  if (idx >= static_cast<int>(entries_.size()) || !entries_[static_cast<size_t>(idx)].live)
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: operator %d was not created on this communicator", op);
  entries_[static_cast<size_t>(idx)].live = false;  // specs resolved from it point at kept or user memory
  freeSlots_.push_back(idx);
  return ncclSuccess;
}

ncclResult_t RedOpTable::resolve(ncclRedOp_t op, ncclDataType_t type, int nranks, ReduceSpec* spec) const {
  spec->type = type;
  spec->scalar = nullptr;
  spec->divisor = 1;
  switch (op) {
    case ncclSum:
      spec->kind = ReduceKind::Sum;
      return ncclSuccess;
    case ncclProd:
      spec->kind = ReduceKind::Prod;
      return ncclSuccess;
    case ncclMax:
      spec->kind = ReduceKind::Max;
      return ncclSuccess;
    case ncclMin:
      spec->kind = ReduceKind::Min;
      return ncclSuccess;
    case ncclAvg:
      spec->kind = ReduceKind::SumPostDiv;
      spec->divisor = nranks;
      return ncclSuccess;
    default:
      break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  int idx = static_cast<int>(op) - ncclNumOps;
  if (idx < 0 || idx >= static_cast<int>(entries_.size()) || !entries_[static_cast<size_t>(idx)].live)
    return fail(ncclInvalidArgument, "invalid reduction operator %d", static_cast<int>(op));
  const Entry& e = entries_[static_cast<size_t>(idx)];
  if (e.type != type)
    return fail(ncclInvalidArgument, "reduction operator %d was created for datatype %d, used with %d",
                static_cast<int>(op), e.type, type);
  spec->kind = ReduceKind::PreMulSum;
  spec->scalar = e.scalar;
  spec->scalarOnHost = e.onHost;
  return ncclSuccess;
}

}  // namespace chorus
