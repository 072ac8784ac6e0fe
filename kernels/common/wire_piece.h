// The loops over the blocks of one piece of a direct reduction (docs/wire.md),
// once for both executors: wire_reduce.h's block operations applied to the
// blocks `first, first + stride, ...` of a piece of `n` elements. The host
// executor runs a piece with (0, 1); a thread block of the lane kernel with
// (threadIdx.x, blockDim.x), one thread per block, every thread working on
// its own blocks. So nothing is carried from one block to the next: block
// `b` starts at element `b * kWireBlockElems` of the element buffers, and at
// byte `b * encodedBytes(format, ..., kWireBlockElems)` of an encoded buffer
// (every block of a piece before its last is whole). Each loop returns the
// bytes the whole piece occupies in its encoded buffer, whichever blocks it
// ran.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/common/wire_reduce.h"

namespace chorus::wire {

// Blocks of a piece of n elements, and the elements of its block b.
CHORUS_HD CHORUS_INLINE uint64_t pieceBlocks(uint64_t n) { return (n + kWireBlockElems - 1) / kWireBlockElems; }
CHORUS_HD CHORUS_INLINE uint32_t blockElemsAt(uint64_t n, uint64_t b) {
  const uint64_t left = n - b * kWireBlockElems;
  return left < kWireBlockElems ? uint32_t(left) : kWireBlockElems;
}

// Bytes of a piece of n elements in each buffer the loops write or read.
// sendPiece's encoding (the scatter phase; PreMulSum's native payload is the
// compute type):
template <typename T>
CHORUS_HD CHORUS_INLINE uint64_t sendPieceBytes(Format f, bool preMul, uint64_t n) {
  return encodedBytes(f, nativeScatterBytes<T>(preMul), n);
}
// The gather phase's encoding (the owner's `out`, gatherPiece's input):
template <typename T>
CHORUS_HD CHORUS_INLINE uint64_t gatherPieceBytes(Format f, uint64_t n) {
  return encodedBytes(f, uint32_t(sizeof(T)), n);
}
// A partial in the compute type (partialPiece's fp32 and a chain link's):
// computePartialBytes (wire_reduce.h).

// A rank's contribution to a piece of another rank's shard (sendBlock per
// block), encoded at `out`. Returns sendPieceBytes.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE uint64_t sendPiece(Format f, const Fn& fn, bool preMul, const T* x, float* residual, uint64_t n,
                                           uint8_t* out, uint32_t first, uint32_t stride) {
  const uint64_t blockBytes = sendPieceBytes<T>(f, preMul, kWireBlockElems);
  for (uint64_t b = first; b < pieceBlocks(n); b += stride) {
    const uint64_t e = b * kWireBlockElems;
    sendBlock(f, fn, preMul, x + e, residual ? residual + e : nullptr, blockElemsAt(n, b), out + b * blockBytes);
  }
  return sendPieceBytes<T>(f, preMul, n);
}

// A gathered piece of the result (gatherBlock per block), decoded into `y`.
// Returns gatherPieceBytes (the bytes read).
template <typename T>
CHORUS_HD CHORUS_INLINE uint64_t gatherPiece(Format f, const uint8_t* in, uint64_t n, T* y, uint32_t first,
                                             uint32_t stride) {
  const uint64_t blockBytes = gatherPieceBytes<T>(f, kWireBlockElems);
  for (uint64_t b = first; b < pieceBlocks(n); b += stride)
    gatherBlock(f, in + b * blockBytes, blockElemsAt(n, b), y + b * kWireBlockElems);
  return gatherPieceBytes<T>(f, n);
}

// A rank's contribution to a piece of another host's shard as an fp32
// partial (partialBlock per block; compressed formats, float-computed
// types). Returns computePartialBytes, or 0 for the other types.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE uint64_t partialPiece(const Fn& fn, const T* x, float* residual, uint64_t n, uint8_t* out,
                                              uint32_t first, uint32_t stride) {
  if constexpr (!std::is_same_v<ComputeOf<T>, float>) return 0;
  const uint64_t blockBytes = computePartialBytes<T>(kWireBlockElems);
  for (uint64_t b = first; b < pieceBlocks(n); b += stride) {
    const uint64_t e = b * kWireBlockElems;
    partialBlock(fn, x + e, residual ? residual + e : nullptr, blockElemsAt(n, b), out + b * blockBytes);
  }
  return computePartialBytes<T>(n);
}

// What a combine of a piece needs: OwnerBlock's fields for the whole piece
// (`in[r]` rank r's received piece, null for `self` and for ranks that send
// nothing; `partial[r]` marks partials in the compute type; `y` and `out`
// may be null). `post`: avg's division (the owner's combine only).
template <typename T>
struct OwnerPiece {
  Format format;
  bool preMul, post;
  int nranks, self;
  const uint8_t* const* in;
  const uint8_t* partial;
  const T* x;
  float* residual;
  T* y;
  uint8_t* out;
  float lossScale;
  uint64_t n;
};

// The three combines of received pieces: the owner's result (ownerBlock), a
// host's combined contribution (hostSumBlock) and a chain link's partial
// (chainBlock).
enum class Combine : uint8_t { Own, HostSum, Chain };

// Bytes a combine writes at `out` for a piece of n elements.
template <typename T>
CHORUS_HD CHORUS_INLINE uint64_t combineOutBytes(Format f, Combine what, bool hasOut, uint64_t n) {
  if (!hasOut) return 0;
  switch (what) {
    case Combine::Own:
      return gatherPieceBytes<T>(f, n);
    case Combine::HostSum:
      return std::is_same_v<ComputeOf<T>, float> ? encodedBytes(f, 4, n) : 0;
    default:
      return computePartialBytes<T>(n);
  }
}

// One combine of a piece's blocks `first, first + stride, ...`. Returns
// combineOutBytes.
template <typename T, typename Fn>
CHORUS_HD CHORUS_INLINE uint64_t combinePiece(const OwnerPiece<T>& p, const Fn& fn, Combine what, uint32_t first,
                                              uint32_t stride) {
  const uint64_t outBlock = combineOutBytes<T>(p.format, what, true, kWireBlockElems);
  OwnerBlock<T> b{};
  b.format = p.format;
  b.preMul = p.preMul;
  b.post = p.post && what == Combine::Own;
  b.nranks = p.nranks;
  b.self = p.self;
  b.in = p.in;
  b.partial = p.partial;
  b.lossScale = p.lossScale;
  for (uint64_t k = first; k < pieceBlocks(p.n); k += stride) {
    const uint64_t e = k * kWireBlockElems;
    b.block = k;
    b.x = p.x + e;
    b.residual = p.residual ? p.residual + e : nullptr;
    b.n = blockElemsAt(p.n, k);
    b.y = p.y ? p.y + e : nullptr;
    b.out = p.out ? p.out + k * outBlock : nullptr;
    if (what == Combine::HostSum)
      hostSumBlock(b, fn);
    else if (what == Combine::Chain)
      chainBlock(b, fn);
    else
      ownerBlock(b, fn);
  }
  return combineOutBytes<T>(p.format, what, p.out != nullptr, p.n);
}

}  // namespace chorus::wire
