// One user call (or one half of a send/recv pair) after argument checking.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/coll_types.h"
#include "nccl.h"

struct ncclComm;

namespace chorus {

// How a reduction travels (chorusReduceConfig_t, docs/wire.md). Inactive:
// the tuner's algorithm on the native type.
struct WireSpec {
  uint8_t format = 0;          // a chorusWire_t; nonzero: compressed
  bool deterministic = false;  // rank-order sum, rounded once
  float* residual = nullptr;   // error feedback (compressed only)
  bool active() const { return format != 0 || deterministic; }
};

struct Task {
  CollType type = CollType::AllReduce;
  ncclComm* comm = nullptr;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // per-rank count as in the API (sendcount / recvcount / count)
  ncclDataType_t dtype = ncclFloat32;
  ReduceSpec spec{};
  int root = 0;  // root for rooted collectives, peer for send/recv
  WireSpec wire{};                // AllReduce, ReduceScatter, Reduce only
  cudaStream_t stream = nullptr;  // GPU mode: where the work is enqueued (not part of the plan's identity)
};

// Bytes the collective moves per rank in the API's terms (the "size" column of nccl-tests).
size_t taskBytes(const Task& t, int nranks);

}  // namespace chorus
