// One user call (or one half of a send/recv pair) after argument checking.
#pragma once

#include <cstddef>

#include "core/coll_types.h"
#include "nccl.h"

struct ncclComm;

namespace chorus {

struct Task {
  CollType type = CollType::AllReduce;
  ncclComm* comm = nullptr;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // per-rank count as in the API (sendcount / recvcount / count)
  ncclDataType_t dtype = ncclFloat32;
  ReduceSpec spec{};
  int root = 0;  // root for rooted collectives, peer for send/recv
  cudaStream_t stream = nullptr;  // GPU mode: where the work is enqueued (not part of the plan's identity)
};

// Bytes the collective moves per rank in the API's terms (the "size" column of nccl-tests).
size_t taskBytes(const Task& t, int nranks);

}  // namespace chorus
