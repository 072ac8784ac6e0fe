#include "core/redop_table.h"

#include <cstring>

#include "core/result.h"

namespace chorus {
ncclResult_t RedOpTable::create(ncclDataType_t type, const void* scalar, ncclScalarResidence_t residence,
                                ncclRedOp_t* op) {
  if (typeSize(type) == 0) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d", type);
  if (scalar == nullptr) return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: scalar is NULL");
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d", residence);
  auto e = std::make_unique<Entry>();
  e->live = true;
  e->type = type;
  e->residence = residence;
  if (residence == ncclScalarHostImmediate)
    std::memcpy(&e->immediate, scalar, typeSize(type));
  else
    e->pointer = scalar;
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back(std::move(e));
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(entries_.size()) - 1);
  return ncclSuccess;
}

ncclResult_t RedOpTable::destroy(ncclRedOp_t op) {
  std::lock_guard<std::mutex> lock(mutex_);
  int idx = static_cast<int>(op) - ncclNumOps;
  if (op < ncclNumOps) return fail(ncclInvalidArgument, "ncclRedOpDestroy: %d is a built-in operator", op);
  if (idx >= static_cast<int>(entries_.size()) || !entries_[idx]->live)
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: operator %d was not created on this communicator", op);
  entries_[idx]->live = false;  // storage stays: a grouped operation may still point at it
  return ncclSuccess;
}

ncclResult_t RedOpTable::resolve(ncclRedOp_t op, ncclDataType_t type, int nranks, ReduceSpec* spec) const {
  spec->type = type;
  spec->scalar = nullptr;
  spec->divisor = 1;
  switch (op) {
    case ncclSum: spec->kind = ReduceKind::Sum; return ncclSuccess;
    case ncclProd: spec->kind = ReduceKind::Prod; return ncclSuccess;
    case ncclMax: spec->kind = ReduceKind::Max; return ncclSuccess;
    case ncclMin: spec->kind = ReduceKind::Min; return ncclSuccess;
    case ncclAvg:
      spec->kind = ReduceKind::SumPostDiv;
      spec->divisor = nranks;
      return ncclSuccess;
    default: break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  int idx = static_cast<int>(op) - ncclNumOps;
  if (idx < 0 || idx >= static_cast<int>(entries_.size()) || !entries_[idx]->live)
    return fail(ncclInvalidArgument, "invalid reduction operator %d", static_cast<int>(op));
  const Entry& e = *entries_[idx];
  if (e.type != type)
    return fail(ncclInvalidArgument, "reduction operator %d was created for datatype %d, used with %d",
                static_cast<int>(op), e.type, type);
  spec->kind = ReduceKind::PreMulSum;
  spec->scalar = e.residence == ncclScalarHostImmediate ? static_cast<const void*>(&e.immediate) : e.pointer;
  spec->scalarOnHost = e.residence == ncclScalarHostImmediate;
  return ncclSuccess;
}

}  // namespace chorus
