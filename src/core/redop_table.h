// Custom reduction operators created by ncclRedOpCreatePreMulSum. Each lives
// in its communicator; the handle is ncclNumOps + index.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/coll_types.h"
#include "nccl.h"

namespace chorus {

class RedOpTable {
 public:
  ncclResult_t create(ncclDataType_t type, const void* scalar, ncclScalarResidence_t residence, ncclRedOp_t* op);
  ncclResult_t destroy(ncclRedOp_t op);
  // Resolves (op, type) into a ReduceSpec for an operation on nranks ranks.
  ncclResult_t resolve(ncclRedOp_t op, ncclDataType_t type, int nranks, ReduceSpec* spec) const;

 private:
  struct Entry {
    bool live = false;
    ncclDataType_t type = ncclFloat32;
    ncclScalarResidence_t residence = ncclScalarHostImmediate;
    uint64_t immediate = 0;         // the scalar's bytes, for ncclScalarHostImmediate
    const void* pointer = nullptr;  // for ncclScalarDevice: read when the collective runs
  };
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;  // never shrinks: specs point into entries
};

}  // namespace chorus
