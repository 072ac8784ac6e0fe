// The vocabulary every layer shares: which collective, on which element type,
// reduced how, by which algorithm and protocol. Nothing here knows how a
// collective is executed, tuned or moved, so the scheduler, the graph search,
// the tuner and both executors can all include it (see docs/architecture.md,
// "Layers").
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/reduce_kind.h"
#include "nccl.h"

namespace chorus {

enum class CollType : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  Send,
  Recv,
};

const char* collName(CollType t);

// A point-to-point call (ncclSend/ncclRecv) rather than a collective.
inline bool isSendOrRecv(CollType t) { return t == CollType::Send || t == CollType::Recv; }

// True for the operations built from sends and receives between pairs of
// ranks (Send, Recv, AlltoAll, Gather, Scatter): they use the Direct
// algorithm, the Simple protocol and no ring or tree.
bool isPointToPoint(CollType t);

// What a reduction computes, for one element type.
struct ReduceSpec {
  ncclDataType_t type;
  ReduceKind kind;
  const void* scalar;         // PreMulSum only: points at one element of `type`; read when the reduction runs
  int divisor;                // SumPostDiv only: nranks (must be >= 1)
  bool scalarOnHost = false;  // PreMulSum: `scalar` is host memory (ncclScalarHostImmediate)
  // The caller asked for ncclAvg, computed as PreMulSum by 1/nranks
  // (RedOpTable::averageByPreMultiply): fingerprints and reports say "avg".
  bool average = false;
  // The kind the caller asked for (what fingerprints compare and reports name).
  ReduceKind askedKind() const { return average ? ReduceKind::SumPostDiv : kind; }
};

// Bytes per element; 0 for an invalid type.
size_t typeSize(ncclDataType_t t);

enum class Algo : uint8_t { Ring = 0, Tree = 1, Direct = 2, Hier = 3 };
enum class Proto : uint8_t { Simple = 0, LL = 1 };
inline constexpr int kNumAlgos = 4;
inline constexpr int kNumProtos = 2;

const char* algoName(Algo a);
const char* protoName(Proto p);

}  // namespace chorus
