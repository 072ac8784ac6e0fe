// Argument validation shared by the entry points. Each check records a
// message naming the function and the offending argument and returns
// ncclInvalidArgument; none touches the communicator's state, so a rejected
// call leaves the communicator usable.
#pragma once

#include <cstddef>

#include "nccl.h"

namespace chorus {

ncclResult_t checkDatatype(ncclDataType_t t, const char* fn);
ncclResult_t checkRoot(int root, int nranks, const char* fn, const char* what = "root");
ncclResult_t checkPtr(const void* p, const char* fn, const char* what);
// A buffer may be NULL only when it holds no data.
ncclResult_t checkBuffer(const void* p, size_t count, const char* fn, const char* what);

}  // namespace chorus
