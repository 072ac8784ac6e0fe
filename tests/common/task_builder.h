// A call as the enqueue layer records it (src/enqueue/task.h), for tests that
// build plans from tasks directly instead of calling the API.
#pragma once

#include <cstddef>

#include "core/coll_types.h"
#include "enqueue/task.h"

namespace chorus::test {

// A plain sum of `dtype`: what most of these tests reduce with.
inline ReduceSpec sumOf(ncclDataType_t dtype) { return ReduceSpec{dtype, ReduceKind::Sum, nullptr, 1}; }

// `count` elements of `dtype` from `in` to `out` on `comm`; `root` is the
// root of a rooted collective or the peer of a send or receive.
inline Task makeTask(ncclComm* comm, CollType coll, ncclDataType_t dtype, const ReduceSpec& spec, const void* in,
                     void* out, size_t count, int root = 0) {
  Task t;
  t.type = coll;
  t.comm = comm;
  t.sendbuff = in;
  t.recvbuff = out;
  t.count = count;
  t.dtype = dtype;
  t.root = root;
  t.spec = spec;
  return t;
}

}  // namespace chorus::test
