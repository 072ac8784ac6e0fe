// Custom reduction operators created by ncclRedOpCreatePreMulSum. Each lives
// in its communicator; the handle is ncclNumOps + index.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/coll_types.h"
#include "nccl.h"

namespace chorus {

// Handles of destroyed operators are given out again, as NCCL does. A
// host-immediate scalar is kept once per (datatype, value), never changed
// nor freed: a spec resolved before a destroy stays valid, and operators
// made again and again with the same value (PyTorch makes one per call)
// resolve to the same spec, so the plan cache finds their plans.
class RedOpTable {
 public:
  ncclResult_t create(ncclDataType_t type, const void* scalar, ncclScalarResidence_t residence, ncclRedOp_t* op);
  ncclResult_t destroy(ncclRedOp_t op);
  // Resolves (op, type) into a ReduceSpec for an operation on nranks ranks.
  ncclResult_t resolve(ncclRedOp_t op, ncclDataType_t type, int nranks, ReduceSpec* spec) const;
  // ncclAvg of a floating-point type as NCCL computes it: each rank's value
  // times 1/nranks rounded to the type, then summed (a sum divided once
  // overflows where the values are near the type's largest). Turns a
  // resolved average (SumPostDiv) of such a type into that PreMulSum; other
  // specs are left as they are. `nranks` is the communicator's, the same on
  // every call.
  void averageByPreMultiply(int nranks, ReduceSpec* spec) const;

 private:
  struct Entry {
    bool live = false;
    ncclDataType_t type = ncclFloat32;
    const void* scalar = nullptr;  // host-immediate: its kept copy; device: read when the collective runs
    bool onHost = false;
  };
  const uint64_t* keptImmediate(ncclDataType_t type, const void* scalar);

  mutable std::mutex mutex_;
  std::vector<Entry> entries_;                                                // handle - ncclNumOps -> operator
  std::vector<int> freeSlots_;                                                // entries of destroyed operators
  std::map<std::pair<int, uint64_t>, std::unique_ptr<uint64_t>> immediates_;  // (datatype, bytes) -> kept copy
  mutable std::once_flag averageOnce_;
  mutable uint64_t averageScalar_[ncclNumTypes] = {};  // per datatype: 1/nranks in it (floating-point types)
};

}  // namespace chorus
