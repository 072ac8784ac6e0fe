// The shared piece loops (kernels/common/wire_piece.h) split among threads
// the way the lane kernel splits them, (first, stride), against a reference
// written here that walks the blocks in order and advances every pointer by
// what each block operation reports, as the host loops did before the
// split: every output byte, residual and returned size must be the same,
// whatever the stride, for every format, for partial last blocks and for
// the three combines (owner, host sum, chain link).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "host/host_reduce_kernels.h"
#include "kernels/common/wire_piece.h"

namespace chorus::wire {
namespace {

constexpr uint64_t kElems = kWireBlockElems * 5 + 77;  // whole blocks and a partial one
constexpr int kRanks = 3, kSelf = 1;
const uint32_t kStrides[] = {1, 2, 3, 7};

template <typename T>
std::vector<T> randomInput(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 4.0f);
  std::vector<T> v(kElems);
  for (T& e : v) e = ElemTraits<T>::narrow(ComputeOf<T>(g(rng)));
  return v;
}

// Everything one case writes, compared byte for byte.
struct Written {
  std::vector<uint8_t> sent, partial, combined, y, gathered;
  std::vector<float> residualAfterSend, residualAfterCombine;
  uint64_t sentBytes = 0, partialBytes = 0, combinedBytes = 0, gatheredBytes = 0;
  bool operator==(const Written&) const = default;
};

template <typename T, ReduceKind K>
struct Case {
  Format format;
  Combine what;
  std::vector<T> x = randomInput<T>(1), peer = randomInput<T>(2);
  T scalar = ElemTraits<T>::narrow(ComputeOf<T>(0.5f));
  static constexpr bool kPreMul = K == ReduceKind::PreMulSum;
  static constexpr bool kFloatCompute = std::is_same_v<ComputeOf<T>, float>;
  auto fn() const { return host::detail::makeFunc<T, K>(host::detail::KernelArgs{&scalar, kRanks}); }
  size_t room() const { return size_t(kElems) * 8 + 64; }
  // Rank 0 sends a contribution, rank 2 a partial where the format allows it.
  bool withPartial() const { return format != Format::Native && kFloatCompute; }

  OwnerPiece<T> ownerPiece(const uint8_t* const* in, const uint8_t* partial, float* residual, Written& w) const {
    const bool post = K == ReduceKind::SumPostDiv && what == Combine::Own;
    return OwnerPiece<T>{format,
                         kPreMul,
                         post,
                         kRanks,
                         kSelf,
                         in,
                         partial,
                         x.data(),
                         residual,
                         reinterpret_cast<T*>(w.y.data()),
                         w.combined.data(),
                         post ? float(kRanks) : 1.0f,
                         kElems};
  }

  // The split loops: every first for one stride, one after the other.
  Written split(uint32_t stride) const {
    Written w = fresh();
    std::vector<float> residual(kElems, 0.01f);
    for (uint32_t first = 0; first < stride; ++first)
      w.sentBytes = sendPiece(format, fn(), kPreMul, peer.data(), format == Format::Native ? nullptr : residual.data(),
                              kElems, w.sent.data(), first, stride);
    w.residualAfterSend = residual;
    if (withPartial())
      for (uint32_t first = 0; first < stride; ++first)
        w.partialBytes = partialPiece(fn(), peer.data(), residual.data(), kElems, w.partial.data(), first, stride);
    const uint8_t* in[kRanks] = {w.sent.data(), nullptr, withPartial() ? w.partial.data() : w.sent.data()};
    const uint8_t isPartial[kRanks] = {0, 0, uint8_t(withPartial() ? 1 : 0)};
    const OwnerPiece<T> p = ownerPiece(in, isPartial, format == Format::Native ? nullptr : residual.data(), w);
    for (uint32_t first = 0; first < stride; ++first) w.combinedBytes = combinePiece(p, fn(), what, first, stride);
    w.residualAfterCombine = residual;
    if (what == Combine::Own)
      for (uint32_t first = 0; first < stride; ++first)
        w.gatheredBytes =
            gatherPiece(format, w.combined.data(), kElems, reinterpret_cast<T*>(w.gathered.data()), first, stride);
    return w;
  }

  // The reference: blocks in order, pointers advanced by each block's bytes.
  Written inOrder() const {
    Written w = fresh();
    std::vector<float> residual(kElems, 0.01f);
    float* res = format == Format::Native ? nullptr : residual.data();
    for (uint64_t i = 0; i < kElems; i += kWireBlockElems)
      w.sentBytes += sendBlock(format, fn(), kPreMul, peer.data() + i, res ? res + i : nullptr,
                               blockElemsAt(kElems, i / kWireBlockElems), w.sent.data() + w.sentBytes);
    w.residualAfterSend = residual;
    if (withPartial())
      for (uint64_t i = 0; i < kElems; i += kWireBlockElems)
        w.partialBytes += partialBlock(fn(), peer.data() + i, residual.data() + i,
                                       blockElemsAt(kElems, i / kWireBlockElems), w.partial.data() + w.partialBytes);
    combineInOrder(w, res);
    w.residualAfterCombine = residual;
    if (what == Combine::Own)
      for (uint64_t i = 0; i < kElems; i += kWireBlockElems)
        w.gatheredBytes +=
            gatherBlock(format, w.combined.data() + w.gatheredBytes, blockElemsAt(kElems, i / kWireBlockElems),
                        reinterpret_cast<T*>(w.gathered.data()) + i);
    return w;
  }

  void combineInOrder(Written& w, float* residual) const {
    const uint8_t* in[kRanks] = {w.sent.data(), nullptr, withPartial() ? w.partial.data() : w.sent.data()};
    const uint8_t isPartial[kRanks] = {0, 0, uint8_t(withPartial() ? 1 : 0)};
    const OwnerPiece<T> p = ownerPiece(in, isPartial, residual, w);
    OwnerBlock<T> b{};
    b.format = p.format;
    b.preMul = p.preMul;
    b.post = p.post;
    b.nranks = p.nranks;
    b.self = p.self;
    b.in = in;
    b.partial = isPartial;
    b.lossScale = p.lossScale;
    for (uint64_t i = 0; i < kElems; i += kWireBlockElems) {
      b.x = x.data() + i;
      b.residual = residual ? residual + i : nullptr;
      b.n = blockElemsAt(kElems, i / kWireBlockElems);
      b.y = p.y + i;
      b.out = w.combined.data() + w.combinedBytes;
      if (what == Combine::HostSum)
        hostSumBlock(b, fn());
      else if (what == Combine::Chain)
        chainBlock(b, fn());
      else
        ownerBlock(b, fn());
      w.combinedBytes += b.outBytes;
      ++b.block;
    }
  }

  Written fresh() const {
    Written w;
    w.sent.assign(room(), 0xee);
    w.partial.assign(room(), 0xee);
    w.combined.assign(room(), 0xee);
    w.y.assign(kElems * sizeof(T), 0xee);
    w.gathered.assign(kElems * sizeof(T), 0xee);
    return w;
  }
};

template <typename T, ReduceKind K>
void expectSplitMatchesInOrder(Format f, Combine what) {
  const Case<T, K> c{f, what};
  const Written reference = c.inOrder();
  ASSERT_GT(reference.sentBytes, 0u);
  ASSERT_GT(reference.combinedBytes, 0u);
  for (uint32_t stride : kStrides) {
    const Written got = c.split(stride);
    EXPECT_EQ(got.sentBytes, reference.sentBytes) << "stride " << stride;
    EXPECT_EQ(got.partialBytes, reference.partialBytes) << "stride " << stride;
    EXPECT_EQ(got.combinedBytes, reference.combinedBytes) << "stride " << stride;
    EXPECT_EQ(got.gatheredBytes, reference.gatheredBytes) << "stride " << stride;
    EXPECT_TRUE(got == reference) << "stride " << stride << ": the split loops wrote other bytes";
  }
}

TEST(WirePieceLoops, CompressedSplitsWriteWhatTheInOrderLoopsWrite) {
  for (Format f : {Format::Bf16, Format::Fp8, Format::Int8}) {
    SCOPED_TRACE(int(f));
    for (Combine what : {Combine::Own, Combine::HostSum}) {
      expectSplitMatchesInOrder<float, ReduceKind::Sum>(f, what);
      expectSplitMatchesInOrder<half_t, ReduceKind::SumPostDiv>(f, what);
      expectSplitMatchesInOrder<bf16_t, ReduceKind::Sum>(f, what);
    }
  }
}

TEST(WirePieceLoops, DeterministicSplitsWriteWhatTheInOrderLoopsWrite) {
  for (Combine what : {Combine::Own, Combine::Chain}) {
    expectSplitMatchesInOrder<float, ReduceKind::Sum>(Format::Native, what);
    expectSplitMatchesInOrder<half_t, ReduceKind::PreMulSum>(Format::Native, what);
    expectSplitMatchesInOrder<double, ReduceKind::SumPostDiv>(Format::Native, what);
    expectSplitMatchesInOrder<int32_t, ReduceKind::Max>(Format::Native, what);
    expectSplitMatchesInOrder<uint8_t, ReduceKind::Prod>(Format::Native, what);
  }
}

TEST(WirePieceLoops, BlockOfAPieceAndItsLastBlock) {
  EXPECT_EQ(pieceBlocks(0), 0u);
  EXPECT_EQ(pieceBlocks(1), 1u);
  EXPECT_EQ(pieceBlocks(kWireBlockElems), 1u);
  EXPECT_EQ(pieceBlocks(kWireBlockElems + 1), 2u);
  EXPECT_EQ(blockElemsAt(kWireBlockElems * 2 + 5, 0), kWireBlockElems);
  EXPECT_EQ(blockElemsAt(kWireBlockElems * 2 + 5, 2), 5u);
  // A stride beyond the piece's blocks leaves the later threads idle.
  std::vector<float> x(10, 1.0f), y(10, 0.0f);
  std::vector<uint8_t> enc(64, 0);
  EXPECT_EQ(sendPiece(Format::Native, FuncSum<float>{}, false, x.data(), nullptr, 10, enc.data(), 5, 32), 40u);
  EXPECT_EQ(enc[0], 0u);  // thread 5 had no block to write
  EXPECT_EQ(sendPiece(Format::Native, FuncSum<float>{}, false, x.data(), nullptr, 10, enc.data(), 0, 32), 40u);
  EXPECT_EQ(gatherPiece(Format::Native, enc.data(), 10, y.data(), 0, 32), 40u);
  EXPECT_EQ(y, x);
}

}  // namespace
}  // namespace chorus::wire
