// Internal to wire_blocks*.cc: the typed loops over the blocks of a piece,
// written once and always inlined, so each file's compile target (baseline
// or AVX2) applies to them and to the block rules they call.
#pragma once

#include <algorithm>
#include <cstdint>

#include "host/host_reduce_kernels.h"
#include "host/wire_blocks.h"
#include "kernels/common/wire_reduce.h"

namespace chorus::host::detail {

template <typename T, ReduceKind K>
struct WireLoopsOf {
  using Fn = decltype(makeFunc<T, K>(KernelArgs{}));

  static CHORUS_INLINE Fn func(const WirePiece& p) { return makeFunc<T, K>(KernelArgs{p.scalar, p.divisor}); }
  static CHORUS_INLINE uint32_t blockAt(const WirePiece& p, uint64_t i) {
    return static_cast<uint32_t>(std::min<uint64_t>(wire::kWireBlockElems, p.n - i));
  }

  static CHORUS_INLINE uint32_t send(const WirePiece& p, const void* src, float* residual, uint8_t* out) {
    const Fn fn = func(p);
    const T* x = static_cast<const T*>(src);
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < p.n; i += wire::kWireBlockElems)
      bytes += wire::sendBlock(p.format, fn, K == ReduceKind::PreMulSum, x + i, residual ? residual + i : nullptr,
                               blockAt(p, i), out + bytes);
    return bytes;
  }

  static CHORUS_INLINE uint32_t gather(const WirePiece& p, const uint8_t* in, void* dst) {
    T* y = static_cast<T*>(dst);
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < p.n; i += wire::kWireBlockElems)
      bytes += wire::gatherBlock(p.format, in + bytes, blockAt(p, i), y + i);
    return bytes;
  }

  static CHORUS_INLINE uint32_t partial(const WirePiece& p, const void* src, float* residual, uint8_t* out) {
    const Fn fn = func(p);
    const T* x = static_cast<const T*>(src);
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < p.n; i += wire::kWireBlockElems)
      bytes += wire::partialBlock(fn, x + i, residual ? residual + i : nullptr, blockAt(p, i), out + bytes);
    return bytes;
  }

  // The owner's combine, a host's combined contribution or a chain link's
  // partial, block by block.
  enum class Combine { Own, HostSum, Chain };
  static CHORUS_INLINE uint32_t combine(const WirePiece& p, const WireOwnerIo& io, Combine what) {
    const Fn fn = func(p);
    const bool preMul = K == ReduceKind::PreMulSum, post = K == ReduceKind::SumPostDiv && what == Combine::Own;
    const uint64_t inBlock = wire::encodedBytes(p.format, wire::nativeScatterBytes<T>(preMul), wire::kWireBlockElems);
    const uint64_t partialBlock = wire::computePartialBytes<T>(wire::kWireBlockElems);
    const T* x = static_cast<const T*>(io.x);
    T* y = static_cast<T*>(io.y);
    wire::OwnerBlock<T> b{};
    b.format = p.format;
    b.preMul = preMul;
    b.post = post;
    b.nranks = io.nranks;
    b.self = io.self;
    b.in = io.in;
    b.partial = io.partial;
    b.lossScale = post ? float(p.divisor) : 1.0f;
    uint32_t bytes = 0;
    for (uint64_t i = 0; i < p.n; i += wire::kWireBlockElems) {
      b.x = x + i;
      b.residual = io.residual ? io.residual + i : nullptr;
      b.n = blockAt(p, i);
      b.y = y ? y + i : nullptr;
      b.out = io.out ? io.out + bytes : nullptr;
      if (what == Combine::HostSum)
        wire::hostSumBlock(b, fn);
      else if (what == Combine::Chain)
        wire::chainBlock(b, fn);
      else
        wire::ownerBlock(b, fn);
      bytes += b.outBytes;
      for (int r = 0; r < io.nranks; ++r)
        if (io.in[r]) io.in[r] += io.partial && io.partial[r] ? partialBlock : inBlock;
    }
    return bytes;
  }

  static CHORUS_INLINE uint32_t own(const WirePiece& p, const WireOwnerIo& io) { return combine(p, io, Combine::Own); }
  static CHORUS_INLINE uint32_t hostSum(const WirePiece& p, const WireOwnerIo& io) {
    return combine(p, io, Combine::HostSum);
  }
  static CHORUS_INLINE uint32_t chain(const WirePiece& p, const WireOwnerIo& io) {
    return combine(p, io, Combine::Chain);
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
