// The AVX2 + F16C compile of the wire block loops (wire_blocks_loops.h): the
// same source as the baseline compile in wire_blocks.cc, every block rule
// inlined into functions built for this target. Like host_reduce_avx2.cc, the
// target is a per-function attribute and everything here has internal
// linkage, so no AVX2 code is shared with callers on other CPUs; wire_blocks.cc
// calls in only after checking the CPU. FMA stays off: contracting a * b + c
// would round differently from the baseline build, and every CPU must produce
// the same bits.
//
// Only the combinations compressed wires accept (float, half, bf16 with sum or
// avg; docs/wire.md) are built here; the others run the baseline loops.
#include "host/wire_blocks_loops.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define CHORUS_WIRE_AVX2 __attribute__((target("avx2,f16c")))

namespace chorus::host::detail {
namespace {

template <typename T, ReduceKind K>
struct Avx2Wire {
  using L = WireLoopsOf<T, K>;
  CHORUS_WIRE_AVX2 static uint32_t send(const WirePiece& p, const void* x, float* r, uint8_t* out) {
    return L::send(p, x, r, out);
  }
  CHORUS_WIRE_AVX2 static uint32_t gather(const WirePiece& p, const uint8_t* in, void* y) {
    return L::gather(p, in, y);
  }
  CHORUS_WIRE_AVX2 static uint32_t own(const WirePiece& p, const WireOwnerIo& io) { return L::own(p, io); }
  CHORUS_WIRE_AVX2 static uint32_t partial(const WirePiece& p, const void* x, float* r, uint8_t* out) {
    return L::partial(p, x, r, out);
  }
  CHORUS_WIRE_AVX2 static uint32_t hostSum(const WirePiece& p, const WireOwnerIo& io) { return L::hostSum(p, io); }
  CHORUS_WIRE_AVX2 static uint32_t chain(const WirePiece& p, const WireOwnerIo& io) { return L::chain(p, io); }
  static constexpr WireLoops kLoops{&send, &gather, &own, &partial, &hostSum, &chain};
};

template <typename T>
const WireLoops* avx2For(ReduceKind k) {
  if (k == ReduceKind::Sum) return &Avx2Wire<T, ReduceKind::Sum>::kLoops;
  if (k == ReduceKind::SumPostDiv) return &Avx2Wire<T, ReduceKind::SumPostDiv>::kLoops;
  return nullptr;
}

}  // namespace

const WireLoops* avx2WireLoops(ncclDataType_t t, ReduceKind k) {
  switch (t) {
    case ncclFloat32:
      return avx2For<float>(k);
    case ncclFloat16:
      return avx2For<half_t>(k);
    case ncclBfloat16:
      return avx2For<bf16_t>(k);
    default:
      return nullptr;
  }
}

}  // namespace chorus::host::detail

#else  // not x86-64: the baseline loops handle everything.

namespace chorus::host::detail {
const WireLoops* avx2WireLoops(ncclDataType_t, ReduceKind) { return nullptr; }
}  // namespace chorus::host::detail

#endif
