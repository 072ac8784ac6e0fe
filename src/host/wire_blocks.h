// The block loops of one piece of a direct reduction (docs/wire.md) on the
// host: kernels/common/wire_piece.h's loops over wire_reduce.h's block rules
// (shared code, written for the lane kernel too), run over every block of a
// piece of `n` elements, straight between the user's buffers and the
// connector slots. The loops are compiled twice from the same code, for the
// baseline x86-64 (or any other) target and for AVX2 + F16C, and the AVX2
// build runs where the CPU has it (host_reduce.h's SimdLevel, which tests and
// benchmarks can force down to Portable).
#pragma once

#include <cstdint>

#include "core/coll_types.h"
#include "kernels/common/wire_codec.h"

namespace chorus::host {

// What the pieces of one task have in common, and the piece's length.
struct WirePiece {
  wire::Format format;
  ncclDataType_t type;
  ReduceKind kind;     // compressed formats: Sum or SumPostDiv
  const void* scalar;  // PreMulSum's scalar (element type)
  int divisor;         // SumPostDiv's divisor (>= 1)
  uint64_t n;          // elements of the piece
};

// A rank's contribution to a piece of another rank's shard, encoded at `out`
// (residual: error feedback, compressed only, else null). Returns the bytes.
uint32_t wireSend(const WirePiece& p, const void* x, float* residual, uint8_t* out);

// A gathered piece of the result, decoded into `y`. Returns the bytes read.
uint32_t wireGather(const WirePiece& p, const uint8_t* in, void* y);

// A rank's contribution to a piece of another host's shard as an fp32
// partial for its own host's combining rank (x plus residual; the residual
// cleared). Returns the bytes.
uint32_t wirePartial(const WirePiece& p, const void* x, float* residual, uint8_t* out);

// The owner's combine of a piece: in[r] is rank r's received piece (null for
// `self`, whose input is `x`, and for ranks that send it nothing); partial[r] (when set) marks partials in the
// compute type among them; `out`, when set, receives the result's encoding. Returns the bytes
// written at `out`.
struct WireOwnerIo {
  int nranks, self;
  const uint8_t** in;
  const uint8_t* partial;
  const void* x;
  float* residual;
  void* y;
  uint8_t* out;
};
uint32_t wireOwn(const WirePiece& p, const WireOwnerIo& io);

// A host's combined contribution to a piece of another host's shard (the
// received partials and x, with the residual), encoded once at `out`; y is
// unused. Returns the bytes written at `out`.
uint32_t wireHostSum(const WirePiece& p, const WireOwnerIo& io);

// A link of deterministic mode's chain across hosts: the previous host's
// partial, the received contributions and x combined in rank order, written
// unrounded (compute type) at `out`; y is unused. Returns the bytes written.
uint32_t wireChain(const WirePiece& p, const WireOwnerIo& io);

}  // namespace chorus::host
