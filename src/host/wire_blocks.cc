// The baseline compile of the wire block loops (wire_blocks_loops.h), and the
// choice per call between it and the AVX2 compile (wire_blocks_avx2.cc).
#include "host/wire_blocks.h"

#include "host/host_reduce.h"
#include "host/wire_blocks_loops.h"

namespace chorus::host {
namespace detail {
namespace {

template <typename T, ReduceKind K>
struct PortableWire {
  using L = WireLoopsOf<T, K>;
  static uint32_t send(const WirePiece& p, const void* x, float* r, uint8_t* out) { return L::send(p, x, r, out); }
  static uint32_t gather(const WirePiece& p, const uint8_t* in, void* y) { return L::gather(p, in, y); }
  static uint32_t own(const WirePiece& p, const WireOwnerIo& io) { return L::own(p, io); }
  static uint32_t partial(const WirePiece& p, const void* x, float* r, uint8_t* out) {
    return L::partial(p, x, r, out);
  }
  static uint32_t hostSum(const WirePiece& p, const WireOwnerIo& io) { return L::hostSum(p, io); }
  static uint32_t chain(const WirePiece& p, const WireOwnerIo& io) { return L::chain(p, io); }
  static constexpr WireLoops kLoops{&send, &gather, &own, &partial, &hostSum, &chain};
};

}  // namespace

const WireLoops* portableWireLoops(ncclDataType_t t, ReduceKind k) {
  return dispatchType(t, [&](auto tt) -> const WireLoops* {
    using T = typename decltype(tt)::type;
    return dispatchKind(k, [&](auto kt) -> const WireLoops* { return &PortableWire<T, decltype(kt)::value>::kLoops; });
  });
}

}  // namespace detail

namespace {

// Types are checked when a call is enqueued, so a table always exists.
const detail::WireLoops& loopsFor(const WirePiece& p) {
  if (activeSimdLevel() == SimdLevel::Avx2)
    if (const detail::WireLoops* l = detail::avx2WireLoops(p.type, p.kind)) return *l;
  return *detail::portableWireLoops(p.type, p.kind);
}

}  // namespace

uint32_t wireSend(const WirePiece& p, const void* x, float* residual, uint8_t* out) {
  return loopsFor(p).send(p, x, residual, out);
}

uint32_t wireGather(const WirePiece& p, const uint8_t* in, void* y) { return loopsFor(p).gather(p, in, y); }

uint32_t wireOwn(const WirePiece& p, const WireOwnerIo& io) { return loopsFor(p).own(p, io); }

uint32_t wirePartial(const WirePiece& p, const void* x, float* residual, uint8_t* out) {
  return loopsFor(p).partial(p, x, residual, out);
}

uint32_t wireHostSum(const WirePiece& p, const WireOwnerIo& io) { return loopsFor(p).hostSum(p, io); }

uint32_t wireChain(const WirePiece& p, const WireOwnerIo& io) { return loopsFor(p).chain(p, io); }

}  // namespace chorus::host
