// The wire kernel: runs the lanes of a direct reduction (compressed wires and
// deterministic mode, docs/wire.md) with one thread block per lane, as the
// host executor's wire_exec.cc runs them on a CPU thread. Each step of a wire
// segment is one piece; the arithmetic is kernels/common/wire_piece.h's loops
// over wire_reduce.h's block rules, the same code the host runs, split among
// the block's threads by wire block (first = threadIdx.x, stride = blockDim.x,
// 256 elements per thread). So a piece's bits do not depend on the executor.
//
// Per piece: thread 0 waits for the connectors (the send slot; or every input
// of the segment's rank table and every output), checks each received slot's
// fingerprint and size, the block synchronizes, every thread runs its
// blocks, the block synchronizes, then thread 0 publishes (size and
// fingerprint) and frees the inputs. Extra outputs of an owner or a relay get
// the first output's bytes with a block-wide copy before they are published.
//
// A wire launch holds the segments of one task (src/gpu/lane_translate.cc);
// its format and error-feedback residual are in the launch header.
#pragma once

#include "kernels/colls/lane_kernel.cuh"
#include "kernels/common/wire_piece.h"

namespace chorus::dev {

struct WireShared {
  int failed;
  const uint8_t* in[kWireMaxRanks];  // the owner's received slots (null: none from that rank)
  uint8_t partial[kWireMaxRanks];    // whether rank r's input is a partial in the compute type
};

// What every piece of a wire segment shares.
template <typename T, ReduceKind K, typename Fn>
struct WireCtx {
  const LaneParams& P;
  const Fn& fn;
  const sched::Segment& seg;
  // The segment's rank table, or null. Owner and relay segments always have
  // one (packLaneParams refuses them otherwise); clang-tidy's analyzer cannot
  // see that, hence the NOLINTs where their tables and outputs are read.
  const int32_t* table;
  wire::Format format;
  OpPrint mine;
  static constexpr bool kPreMul = K == ReduceKind::PreMulSum;
};

__device__ __forceinline__ uint8_t* slotOf(const LaneParams& P, int fifo) { return currentSlot<uint8_t>(P, fifo); }

// Thread 0: every output of `outs` (n entries, kNoFifo where none) has a
// free slot; the first of them in *first (-1 when there is none).
__device__ inline bool waitOutputs(const LaneParams& P, const int32_t* outs, int n, int* first, Waiter& w) {
  *first = -1;
  for (int r = 0; r < n; ++r) {
    if (outs[r] == sched::kNoConn) continue;  // NOLINT(clang-analyzer-core.NullDereference)
    if (!waitEmpty(P.fifos[outs[r]], w)) return false;
    if (*first < 0) *first = outs[r];
  }
  return true;
}

// Block-wide: the first output's `bytes` copied to every other output of
// `outs`; then (thread 0) every output published.
__device__ inline void publishOutputs(const LaneParams& P, const int32_t* outs, int n, int first, uint32_t bytes,
                                      const OpPrint& mine) {
  if (first < 0) return;
  const uint8_t* encoded = slotOf(P, first);
  for (int r = 0; r < n; ++r)
    // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
    if (outs[r] != sched::kNoConn && outs[r] != first) copyPiece<uint8_t>(slotOf(P, outs[r]), encoded, bytes);
  __syncthreads();
  if (threadIdx.x == 0)
    for (int r = 0; r < n; ++r)
      if (outs[r] != sched::kNoConn) publishSimple(P.fifos[outs[r]], bytes, mine);
}

// WireSend (encoded) or WirePartial (fp32, for this host's combining rank).
template <typename T, ReduceKind K, typename Fn>
__device__ bool sendWirePiece(const WireCtx<T, K, Fn>& c, const sched::StepDesc& d, WireShared& sh, Waiter& w) {
  const DevFifo& out = c.P.fifos[c.seg.conn[1]];
  if (threadIdx.x == 0 && !waitEmpty(out, w)) sh.failed = 1;
  __syncthreads();
  if (sh.failed) return false;
  const T* x = static_cast<const T*>(c.seg.src) + d.srcOff;
  float* residual = c.P.L.residual ? c.P.L.residual + d.srcOff : nullptr;
  uint8_t* slot = slotOf(c.P, c.seg.conn[1]);
  const uint64_t bytes = c.seg.kind == sched::SegmentKind::WirePartial
                             ? wire::partialPiece(c.fn, x, residual, d.count, slot, threadIdx.x, blockDim.x)
                             : wire::sendPiece(c.format, c.fn, WireCtx<T, K, Fn>::kPreMul, x, residual, d.count, slot,
                                               threadIdx.x, blockDim.x);
  __syncthreads();
  if (threadIdx.x == 0) publishSimple(out, uint32_t(bytes), c.mine);
  return true;
}

// WireGather, or WireRelay (which also passes the encoding on).
template <typename T, ReduceKind K, typename Fn>
__device__ bool gatherWirePiece(const WireCtx<T, K, Fn>& c, const sched::StepDesc& d, WireShared& sh, Waiter& w) {
  const DevFifo& in = c.P.fifos[c.seg.conn[0]];
  const bool relays = c.seg.kind == sched::SegmentKind::WireRelay;
  const int32_t* outs = relays ? c.table + c.seg.nranks : nullptr;
  const uint32_t bytes = uint32_t(wire::gatherPieceBytes<T>(c.format, d.count));
  __shared__ int first;
  if (threadIdx.x == 0) {
    first = -1;
    const bool ok =
        waitFilled(c.P, in, d, bytes, c.mine, w) && (!relays || waitOutputs(c.P, outs, c.seg.nranks, &first, w));
    if (!ok) sh.failed = 1;
  }
  __syncthreads();
  if (sh.failed) return false;
  const uint8_t* slot = slotOf(c.P, c.seg.conn[0]);
  wire::gatherPiece(c.format, slot, d.count, static_cast<T*>(c.seg.dst) + d.dstOff, threadIdx.x, blockDim.x);
  if (first >= 0) copyPiece<uint8_t, true>(slotOf(c.P, first), slot, bytes);
  __syncthreads();
  if (relays) publishOutputs(c.P, outs, c.seg.nranks, first, bytes, c.mine);
  __syncthreads();
  if (threadIdx.x == 0) releaseSlot(in);
  return true;
}

// Thread 0: every input of an owner's table received with the size it must
// have, noted in sh; every output free. False on failure.
template <typename T, ReduceKind K, typename Fn>
__device__ bool waitOwnerIo(const WireCtx<T, K, Fn>& c, const sched::StepDesc& d, WireShared& sh, int* first,
                            Waiter& w) {
  const int n = c.seg.nranks;
  const uint32_t encoded = uint32_t(wire::sendPieceBytes<T>(c.format, WireCtx<T, K, Fn>::kPreMul, d.count));
  const uint32_t partial = uint32_t(wire::computePartialBytes<T>(d.count));
  for (int r = 0; r < n; ++r) {
    sh.in[r] = nullptr;
    sh.partial[r] = c.table[2 * n + r] != 0 ? 1 : 0;  // NOLINT(clang-analyzer-core.NullDereference)
    if (c.table[r] == sched::kNoConn) continue;
    const DevFifo& f = c.P.fifos[c.table[r]];
    if (!waitFilled(c.P, f, d, sh.partial[r] ? partial : encoded, c.mine, w)) return false;
    sh.in[r] = slotOf(c.P, c.table[r]);
  }
  return waitOutputs(c.P, c.table + n, n, first, w);
}

// WireOwner (the shard's result, encoded for every gatherer), WireHostSum
// (the host's contribution, encoded for the owner) or WireChain (the partial
// of every rank up to this host's, for the next host).
template <typename T, ReduceKind K, typename Fn>
__device__ bool ownerWirePiece(const WireCtx<T, K, Fn>& c, const sched::StepDesc& d, WireShared& sh, Waiter& w) {
  const int n = c.seg.nranks;
  __shared__ int first;
  if (threadIdx.x == 0 && !waitOwnerIo(c, d, sh, &first, w)) sh.failed = 1;
  __syncthreads();
  if (sh.failed) return false;
  const wire::Combine what = c.seg.kind == sched::SegmentKind::WireHostSum ? wire::Combine::HostSum
                             : c.seg.kind == sched::SegmentKind::WireChain ? wire::Combine::Chain
                                                                           : wire::Combine::Own;
  const bool post = K == ReduceKind::SumPostDiv && what == wire::Combine::Own;
  const wire::OwnerPiece<T> piece{c.format,
                                  WireCtx<T, K, Fn>::kPreMul,
                                  post,
                                  n,
                                  c.seg.pos,
                                  sh.in,
                                  sh.partial,
                                  static_cast<const T*>(c.seg.src) + d.srcOff,
                                  c.P.L.residual ? c.P.L.residual + d.srcOff : nullptr,
                                  d.dstOff == sched::kNoBuffer ? nullptr : static_cast<T*>(c.seg.dst) + d.dstOff,
                                  first >= 0 ? slotOf(c.P, first) : nullptr,
                                  post ? float(c.P.L.divisor) : 1.0f,
                                  d.count};
  const uint64_t bytes = wire::combinePiece(piece, c.fn, what, threadIdx.x, blockDim.x);
  __syncthreads();
  publishOutputs(c.P, c.table + n, n, first, uint32_t(bytes), c.mine);
  __syncthreads();
  if (threadIdx.x == 0)
    for (int r = 0; r < n; ++r)
      // NOLINTNEXTLINE(clang-analyzer-core.NullDereference)
      if (c.table[r] != sched::kNoConn) releaseSlot(c.P.fifos[c.table[r]]);
  return true;
}

template <typename T, ReduceKind K, typename Fn>
__device__ bool runWirePiece(const WireCtx<T, K, Fn>& c, const sched::StepDesc& d, WireShared& sh, Waiter& w) {
  switch (c.seg.kind) {
    case sched::SegmentKind::WireSend:
    case sched::SegmentKind::WirePartial:
      return sendWirePiece(c, d, sh, w);
    case sched::SegmentKind::WireGather:
    case sched::SegmentKind::WireRelay:
      return gatherWirePiece(c, d, sh, w);
    default:
      return ownerWirePiece(c, d, sh, w);
  }
}

template <typename T, ReduceKind K>
__global__ void __launch_bounds__(kLaneMaxThreads) wireKernel(const __grid_constant__ LaneParams P) {
  __shared__ WireShared sh;
  if (threadIdx.x == 0) sh.failed = 0;
  __syncthreads();
  const DevLane lane = P.lanes[blockIdx.x];
  const auto fn = launchFunctor<T, K>(P);
  const wire::Format format = wire::servedFormat<T, K>(static_cast<wire::Format>(P.L.wireFormat));
  Waiter w(P, &sh.failed);
  for (uint32_t g = 0; g < lane.nSegments; ++g) {
    const sched::Segment& seg = P.segments[lane.firstSegment + g];
    const int32_t* table = seg.ringTable >= 0 ? P.rankTable + seg.ringTable : nullptr;
    const WireCtx<T, K, decltype(fn)> c{P, fn, seg, table, format, taskPrint(P, seg.task)};
    const uint64_t nSteps = sched::segmentSteps(seg);
    for (uint64_t i = 0; i < nSteps; ++i) {
      if (!runWirePiece(c, sched::segmentStep(seg, table, i), sh, w)) return;
      w.progressed();
      __syncthreads();  // thread 0 advanced positions; everyone reads them next piece
    }
  }
  if (threadIdx.x == 0 && drainSends(P, w)) w.laneEnded();
}

}  // namespace chorus::dev
