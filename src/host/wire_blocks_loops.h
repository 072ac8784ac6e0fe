// Internal to wire_blocks*.cc: the typed entry points to the shared piece
// loops (kernels/common/wire_piece.h), always inlined, so each file's compile
// target (baseline or AVX2) applies to the loops and the block rules they
// call.
#pragma once

#include <cstdint>

#include "host/host_reduce_kernels.h"
#include "host/wire_blocks.h"
#include "kernels/common/wire_piece.h"

namespace chorus::host::detail {

template <typename T, ReduceKind K>
struct WireLoopsOf {
  static constexpr bool kPreMul = K == ReduceKind::PreMulSum;

  static CHORUS_INLINE auto func(const WirePiece& p) { return makeFunc<T, K>(KernelArgs{p.scalar, p.divisor}); }
  static CHORUS_INLINE wire::Format format(const WirePiece& p) { return wire::servedFormat<T, K>(p.format); }

  // The host runs every block of a piece in order: first 0, stride 1.
  static CHORUS_INLINE uint32_t send(const WirePiece& p, const void* src, float* residual, uint8_t* out) {
    return uint32_t(wire::sendPiece(format(p), func(p), kPreMul, static_cast<const T*>(src), residual, p.n, out, 0, 1));
  }

  static CHORUS_INLINE uint32_t gather(const WirePiece& p, const uint8_t* in, void* dst) {
    return uint32_t(wire::gatherPiece(format(p), in, p.n, static_cast<T*>(dst), 0, 1));
  }

  static CHORUS_INLINE uint32_t partial(const WirePiece& p, const void* src, float* residual, uint8_t* out) {
    return uint32_t(wire::partialPiece(func(p), static_cast<const T*>(src), residual, p.n, out, 0, 1));
  }

  static CHORUS_INLINE uint32_t combine(const WirePiece& p, const WireOwnerIo& io, wire::Combine what) {
    const bool post = K == ReduceKind::SumPostDiv && what == wire::Combine::Own;
    const wire::OwnerPiece<T> piece{format(p),   kPreMul,
                                    post,        io.nranks,
                                    io.self,     io.in,
                                    io.partial,  static_cast<const T*>(io.x),
                                    io.residual, static_cast<T*>(io.y),
                                    io.out,      post ? float(p.divisor) : 1.0f,
                                    p.n};
    return uint32_t(wire::combinePiece(piece, func(p), what, 0, 1));
  }

  static CHORUS_INLINE uint32_t own(const WirePiece& p, const WireOwnerIo& io) {
    return combine(p, io, wire::Combine::Own);
  }
  static CHORUS_INLINE uint32_t hostSum(const WirePiece& p, const WireOwnerIo& io) {
    return combine(p, io, wire::Combine::HostSum);
  }
  static CHORUS_INLINE uint32_t chain(const WirePiece& p, const WireOwnerIo& io) {
    return combine(p, io, wire::Combine::Chain);
  }
};

// One compile target's loops for one (type, kind).
struct WireLoops {
  uint32_t (*send)(const WirePiece&, const void*, float*, uint8_t*);
  uint32_t (*gather)(const WirePiece&, const uint8_t*, void*);
  uint32_t (*own)(const WirePiece&, const WireOwnerIo&);
  uint32_t (*partial)(const WirePiece&, const void*, float*, uint8_t*);
  uint32_t (*hostSum)(const WirePiece&, const WireOwnerIo&);
  uint32_t (*chain)(const WirePiece&, const WireOwnerIo&);
};

// Null where that target has no loops for the combination.
const WireLoops* portableWireLoops(ncclDataType_t t, ReduceKind k);
const WireLoops* avx2WireLoops(ncclDataType_t t, ReduceKind k);

}  // namespace chorus::host::detail
