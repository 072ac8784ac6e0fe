// Argument validation shared by the entry points. Each check records a
// message naming the function and the offending argument and returns
// ncclInvalidArgument; none touches the communicator's state, so a rejected
// call leaves the communicator usable.
#pragma once

#include <cstddef>
#include <cstring>

#include "nccl.h"

namespace chorus {

// The integer a C caller passed for an enum parameter. C code may pass any
// int; reading it through the C++ enum type would be undefined behaviour
// when it lies outside the enum's range, so it is read as bytes.
template <typename Enum>
int enumValue(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

ncclResult_t checkDatatype(int t, const char* fn);
ncclResult_t checkRoot(int root, int nranks, const char* fn, const char* what = "root");
ncclResult_t checkPtr(const void* p, const char* fn, const char* what);
// A buffer may be NULL only when it holds no data.
ncclResult_t checkBuffer(const void* p, size_t count, const char* fn, const char* what);
// Largest buffer an operation may name: 2^57 bytes, more than any address
// space (57-bit virtual addresses) can hold, so nothing allocated from a
// byte count (count x datatype size x ranks) can overflow size_t.
constexpr size_t kMaxBufferBytes = size_t{1} << 57;
// The bytes of `count` x `blocks` elements of datatype `dtype` (valid); fails
// with ncclInvalidArgument naming `what` if that overflows or exceeds kMaxBufferBytes.
ncclResult_t checkBufferBytes(size_t count, size_t blocks, int dtype, const char* fn, const char* what);

}  // namespace chorus
