// Segments (src/sched/segment.h) checked by simulating every rank of a
// collective together (tests/unit/segment_sim_util.h), for random ring sizes,
// positions, ring tables, counts (0, 1, fewer than the ranks, above 2^32),
// begins, round sizes and in-place or not: every rank ends with the complete
// result, each contribution reduced once, and the k-th piece sent on a
// connector has the size of the k-th piece received. Then 64-bit offsets,
// asBytes, and the step functions in constant expressions.
#include "sched/segment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "unit/segment_sim_util.h"

namespace chorus::sched {
namespace {

using namespace sim;  // NOLINT: the simulator's vocabulary

// --- random parameters ---------------------------------------------------------

uint64_t pickCount(std::mt19937_64& rng, int n) {
  switch (rng() % 7) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return rng() % static_cast<uint64_t>(n);
    case 3:
      return rng() % 100;
    case 4:
      return rng() % 5000;
    case 5:
      return rng() % (uint64_t(1) << 24);
    default:
      return (uint64_t(1) << 32) + rng() % (uint64_t(1) << 34);
  }
}

// Elements per round: anything from one element up, at most `maxRounds` rounds.
uint64_t pickRoundElems(std::mt19937_64& rng, uint64_t count, int n, uint64_t maxRounds) {
  uint64_t r = 1 + rng() % (2 * count + 2);
  if (rng() % 3 == 0) r = static_cast<uint64_t>(n) * (1 + rng() % (count / static_cast<uint64_t>(n) + 1));
  return std::max(r, ceilDiv(count, maxRounds));
}

std::string describe(const Segment& s) {
  return std::string(segmentKindName(s.kind)) + " n=" + std::to_string(s.nranks) + " n2=" + std::to_string(s.nranks2) +
         " begin=" + std::to_string(s.begin) + " count=" + std::to_string(s.count) +
         " roundElems=" + std::to_string(s.roundElems) + " blockElems=" + std::to_string(s.blockElems) +
         " flags=" + std::to_string(s.flags);
}

Mask allRanks(int n) { return n >= 64 ? ~Mask(0) : bit(n) - 1; }

// One ring of n positions, position p sending on connector p.
Segment ringSegment(SegmentKind kind, int n, int p, uint64_t begin, uint64_t count, uint64_t roundElems) {
  Segment s;
  s.kind = kind;
  s.nranks = n;
  s.pos = p;
  s.begin = begin;
  s.count = count;
  s.roundElems = roundElems;
  s.conn[0] = static_cast<int16_t>(ringPrev(p, n));
  s.conn[1] = static_cast<int16_t>(p);
  return s;
}

// Ring all-reduce, DirectPair and Hier all end with the complete reduction.
Expect allReduced(const World& w, uint64_t begin, uint64_t count) {
  return Expect{begin, count, {w.full, w.full, 1, 0}};
}

void initAllReduceInput(RankSim& r, uint64_t begin, uint64_t count) {
  const Val v{bit(r.id), 0, 0, begin};
  if (r.inPlace)
    r.dst.write(begin, count, v);
  else
    r.src.write(begin, count, v);
}

void runRingAllReduceCase(std::mt19937_64& rng) {
  const int n = 2 + static_cast<int>(rng() % 15);
  const uint64_t count = pickCount(rng, n);
  const uint64_t begin = rng() % 3 == 0 ? 0 : rng() % (uint64_t(1) << 40);
  const uint64_t roundElems = pickRoundElems(rng, count, n, n > 8 ? 3 : 6);
  const bool inPlace = rng() % 2 == 0;
  World w;
  w.full = allRanks(n);
  for (int p = 0; p < n; ++p) {
    RankSim r;
    r.seg = ringSegment(SegmentKind::RingAllReduce, n, p, begin, count, roundElems);
    r.id = p;
    r.inPlace = inPlace;
    if (inPlace) r.seg.flags = kSegInPlace;
    initAllReduceInput(r, begin, count);
    w.ranks.push_back(r);
  }
  w.run();
  for (const RankSim& r : w.ranks) w.checkOutput(r, {allReduced(w, begin, count)});
  ASSERT_EQ(w.error, "") << describe(w.ranks[0].seg) << " inPlace=" << inPlace;
  for (const RankSim& r : w.ranks)
    ASSERT_EQ(segmentSteps(r.seg), count == 0 ? 0 : ceilDiv(count, roundElems) * uint64_t(2 * n - 1));
}

std::vector<int32_t> ringTable(std::mt19937_64& rng, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  if (rng() % 2 == 0) std::shuffle(t.begin(), t.end(), rng);
  return t;
}

void runRingBlockCase(std::mt19937_64& rng, SegmentKind kind) {
  const bool gather = kind == SegmentKind::RingGather;
  const int n = 2 + static_cast<int>(rng() % 15);
  const uint64_t count = pickCount(rng, n);
  const uint64_t begin = rng() % 2 == 0 ? 0 : rng() % (uint64_t(1) << 33);
  const uint64_t blockElems = begin + count + (rng() % 2 == 0 ? 0 : rng() % 1000);
  const uint64_t roundElems = pickRoundElems(rng, count, n, n > 8 ? 4 : 8);
  const bool inPlace = gather && rng() % 2 == 0;
  const std::vector<int32_t> table = ringTable(rng, n);
  const bool identity = std::is_sorted(table.begin(), table.end()) && rng() % 2 == 0;
  World w;
  w.full = allRanks(n);
  for (int p = 0; p < n; ++p) {
    RankSim r;
    r.seg = ringSegment(kind, n, p, begin, count, roundElems);
    r.seg.blockElems = blockElems;
    r.seg.ringTable = identity ? -1 : 0;
    r.table = identity ? nullptr : table.data();
    r.id = table[static_cast<size_t>(p)];
    const uint64_t own = static_cast<uint64_t>(r.id) * blockElems;
    if (gather) {
      r.inPlace = inPlace;
      r.srcShift = own;
      if (inPlace) r.seg.flags = kSegInPlace;
      (inPlace ? r.dst : r.src).write(begin + (inPlace ? own : 0), count, Val{bit(r.id), 0, 0, own + begin});
    } else {
      for (int b = 0; b < n; ++b) {
        const uint64_t at = static_cast<uint64_t>(b) * blockElems + begin;
        r.src.write(at, count, Val{bit(r.id), 0, 0, at});
      }
    }
    w.ranks.push_back(r);
  }
  w.run();
  for (const RankSim& r : w.ranks) {
    std::vector<Expect> want;
    if (gather)
      for (int b = 0; b < n; ++b)
        want.push_back({static_cast<uint64_t>(b) * blockElems + begin, count, {bit(b), 0, 0, 0}});
    else
      want.push_back({begin, count, {w.full, w.full, 1, 0}, static_cast<uint64_t>(r.id) * blockElems});
    w.checkOutput(r, want);
  }
  ASSERT_EQ(w.error, "") << describe(w.ranks[0].seg) << " inPlace=" << inPlace
                         << " table=" << (identity ? "none" : "set");
}

void runDirectPairCase(std::mt19937_64& rng) {
  const uint64_t count = pickCount(rng, 2);
  const uint64_t begin = rng() % 2 == 0 ? 0 : rng() % (uint64_t(1) << 36);
  const uint64_t roundElems = pickRoundElems(rng, count, 2, 64);
  const bool inPlace = rng() % 2 == 0;
  World w;
  w.full = allRanks(2);
  for (int p = 0; p < 2; ++p) {
    RankSim r;
    r.seg.kind = SegmentKind::DirectPair;
    r.seg.begin = begin;
    r.seg.count = count;
    r.seg.roundElems = roundElems;
    r.seg.nranks = 2;
    r.seg.conn[0] = static_cast<int16_t>(1 - p);
    r.seg.conn[1] = static_cast<int16_t>(p);
    r.id = p;
    r.inPlace = inPlace;
    initAllReduceInput(r, begin, count);
    w.ranks.push_back(r);
  }
  w.run();
  for (const RankSim& r : w.ranks) w.checkOutput(r, {allReduced(w, begin, count)});
  ASSERT_EQ(w.error, "") << describe(w.ranks[0].seg) << " inPlace=" << inPlace;
  ASSERT_EQ(segmentSteps(w.ranks[0].seg), 2 * ceilDiv(count, roundElems));
}

// Hier: rank h*G+g is local position g on host h; connectors 0.. (local
// reduce-scatter), 1000.. (inter-host), 2000.. (local all-gather).
void runHierCase(std::mt19937_64& rng) {
  int G = 0, H = 0;
  while (G * H < 2) {
    G = 1 + static_cast<int>(rng() % 6);
    H = 1 + static_cast<int>(rng() % 5);
  }
  const uint64_t count = pickCount(rng, G * H);
  const uint64_t begin = rng() % 2 == 0 ? 0 : rng() % (uint64_t(1) << 36);
  const uint64_t roundElems = pickRoundElems(rng, count, G, 4);
  const bool inPlace = rng() % 2 == 0;
  World w;
  w.full = allRanks(G * H);
  for (int h = 0; h < H; ++h) {
    for (int g = 0; g < G; ++g) {
      RankSim r;
      Segment& s = r.seg;
      s.kind = SegmentKind::Hier;
      s.begin = begin;
      s.count = count;
      s.roundElems = roundElems;
      s.nranks = G;
      s.pos = g;
      s.nranks2 = H;
      s.pos2 = h;
      if (inPlace) s.flags = kSegInPlace;
      if (G > 1) {
        s.conn[kHierScatterRecv] = static_cast<int16_t>(h * G + ringPrev(g, G));
        s.conn[kHierScatterSend] = static_cast<int16_t>(h * G + g);
        s.conn[kHierGatherRecv] = static_cast<int16_t>(2000 + h * G + ringPrev(g, G));
        s.conn[kHierGatherSend] = static_cast<int16_t>(2000 + h * G + g);
      }
      if (H > 1) {
        s.conn[kHierInterRecv] = static_cast<int16_t>(1000 + g * H + ringPrev(h, H));
        s.conn[kHierInterSend] = static_cast<int16_t>(1000 + g * H + h);
      }
      r.id = h * G + g;
      r.inPlace = inPlace;
      initAllReduceInput(r, begin, count);
      w.ranks.push_back(r);
    }
  }
  w.run();
  for (const RankSim& r : w.ranks) w.checkOutput(r, {allReduced(w, begin, count)});
  ASSERT_EQ(w.error, "") << describe(w.ranks[0].seg) << " inPlace=" << inPlace;
  const uint64_t perRound = (G > 1 ? 2 * uint64_t(G) : 0) + (H > 1 ? 2 * uint64_t(H) - 1 : 0);
  ASSERT_EQ(segmentSteps(w.ranks[0].seg), count == 0 ? 0 : ceilDiv(count, roundElems) * perRound);
}

// --- the property tests ----------------------------------------------------------

TEST(SegmentSim, SimulatorCatchesAWrongPieceSize) {
  // The checks above must be able to fail: a ring whose ranks disagree on
  // the count deadlocks or mismatches.
  World w;
  w.full = allRanks(3);
  for (int p = 0; p < 3; ++p) {
    RankSim r;
    r.seg = ringSegment(SegmentKind::RingAllReduce, 3, p, 0, p == 1 ? 31 : 30, 30);
    r.id = p;
    initAllReduceInput(r, 0, r.seg.count);
    w.ranks.push_back(r);
  }
  w.run();
  EXPECT_NE(w.error, "");
}

TEST(SegmentSim, SimulatorCatchesAMisplacedOutput) {
  World w;
  w.full = allRanks(2);
  for (int p = 0; p < 2; ++p) {
    RankSim r;
    r.seg = ringSegment(SegmentKind::RingAllReduce, 2, p, p == 0 ? 0 : 10, 10, 10);  // ranks disagree on begin
    r.id = p;
    initAllReduceInput(r, r.seg.begin, 10);
    w.ranks.push_back(r);
  }
  w.run();
  for (const RankSim& r : w.ranks) w.checkOutput(r, {allReduced(w, r.seg.begin, 10)});
  EXPECT_NE(w.error, "");
}

TEST(SegmentSim, RingAllReduceEveryRankGetsTheFullReduction) {
  std::mt19937_64 rng(0x5e9a11);
  for (int i = 0; i < 1500; ++i) ASSERT_NO_FATAL_FAILURE(runRingAllReduceCase(rng)) << "case " << i;
}

TEST(SegmentSim, RingGatherEveryRankGetsEveryBlock) {
  std::mt19937_64 rng(0x9a7e4);
  for (int i = 0; i < 1000; ++i)
    ASSERT_NO_FATAL_FAILURE(runRingBlockCase(rng, SegmentKind::RingGather)) << "case " << i;
}

TEST(SegmentSim, RingScatterEveryRankGetsItsReducedBlock) {
  std::mt19937_64 rng(0x5ca77e);
  for (int i = 0; i < 1000; ++i)
    ASSERT_NO_FATAL_FAILURE(runRingBlockCase(rng, SegmentKind::RingScatter)) << "case " << i;
}

TEST(SegmentSim, DirectPairBothRanksGetTheSum) {
  std::mt19937_64 rng(0xd1ec7);
  for (int i = 0; i < 2000; ++i) ASSERT_NO_FATAL_FAILURE(runDirectPairCase(rng)) << "case " << i;
}

// Recursive doubling's exchanges (plan_direct.cc): the first reads the
// input with PreMulSum's scalar, later ones the previous result without it;
// only the last applies SumPostDiv. Flags 0 stay the two-rank all-reduce.
TEST(Segment, LaterDirectExchangesReadTheResultAndOnlyTheLastDivides) {
  Segment s;
  s.kind = SegmentKind::DirectPair;
  s.count = 10;
  s.roundElems = 10;
  s.nranks = 2;
  s.conn[0] = 3;
  s.conn[1] = 4;
  struct Case {
    uint8_t flags;
    StepInput input;
    uint8_t preSrc, post;
  };
  for (const Case c :
       {Case{0, StepInput::Src, 1, 1}, Case{kSegPairNotLast, StepInput::Src, 1, 0},
        Case{kSegPairFromDst | kSegPairNotLast, StepInput::Dst, 0, 0}, Case{kSegPairFromDst, StepInput::Dst, 0, 1}}) {
    s.flags = c.flags;
    ASSERT_EQ(segmentSteps(s), 2u);
    const StepDesc send = segmentStep(s, nullptr, 0), recv = segmentStep(s, nullptr, 1);
    EXPECT_EQ(send.nSend, 1) << int(c.flags);
    EXPECT_EQ(send.send[0], 4);
    EXPECT_EQ(send.nRecv, 0);
    EXPECT_EQ(recv.nRecv, 1);
    EXPECT_EQ(recv.recv[0], 3);
    EXPECT_EQ(recv.dstOff, 0u);
    for (const StepDesc& d : {send, recv}) {
      EXPECT_EQ(d.input, c.input) << int(c.flags);
      EXPECT_EQ(d.preSrc, c.preSrc) << int(c.flags);
    }
    EXPECT_EQ(recv.post, c.post) << int(c.flags);
  }
}

TEST(SegmentSim, HierEveryRankGetsTheFullReduction) {
  std::mt19937_64 rng(0x41e2);
  for (int i = 0; i < 1500; ++i) ASSERT_NO_FATAL_FAILURE(runHierCase(rng)) << "case " << i;
}

// --- 64-bit sizes ---------------------------------------------------------------

TEST(Segment, SixteenGiBAllReduceStepCountAndLastOffsets) {
  constexpr uint64_t kElems = (uint64_t(16) << 30) / sizeof(float);  // 2^32 floats
  constexpr int n = 8;
  constexpr uint64_t kRoundElems = (131072 / sizeof(float)) * 4 * n;  // default slots: chunk = 4 slots
  for (const Range range : {Range{0, kElems}, splitAligned(kElems + 12345, 3, 2, 16)}) {
    for (int p = 0; p < n; ++p) {
      const Segment s = ringSegment(SegmentKind::RingAllReduce, n, p, range.begin, range.count, kRoundElems);
      const uint64_t rounds = (range.count + kRoundElems - 1) / kRoundElems;
      ASSERT_EQ(segmentSteps(s), rounds * (2 * n - 1));
      // Over the last round, this rank's outputs end exactly at the range's end.
      uint64_t maxEnd = 0;
      for (uint64_t i = (rounds - 1) * (2 * n - 1); i < segmentSteps(s); ++i) {
        const StepDesc d = segmentStep(s, nullptr, i);
        if (d.dstOff != kNoBuffer) maxEnd = std::max(maxEnd, d.dstOff + d.count);
        if (d.input != StepInput::None) {
          EXPECT_LE(d.srcOff + d.count, range.end());
        }
        EXPECT_GT(d.count, 0u);
      }
      EXPECT_EQ(maxEnd, range.end()) << "pos " << p;
      // Position n-2's last step receives the round's last chunk.
      if (p == n - 2) {
        const StepDesc last = segmentStep(s, nullptr, segmentSteps(s) - 1);
        EXPECT_GT(last.dstOff, uint64_t(1) << 31);
        EXPECT_EQ(last.dstOff + last.count, range.begin + range.count);
      }
    }
  }
}

TEST(Segment, BlockOffsetsAbove32BitsAreNotTruncated) {
  constexpr uint64_t kBlock = (uint64_t(3) << 31) + 7;  // elements per rank
  constexpr int32_t kTable[] = {1, 0, 2, 3};
  Segment s = ringSegment(SegmentKind::RingGather, 4, 0, 0, kBlock, kBlock);
  s.blockElems = kBlock;
  s.ringTable = 0;
  // Gather step 1 at position 0 receives the block of position 3 (rank 3).
  const StepDesc d = segmentStep(s, kTable, 1);
  EXPECT_EQ(d.dstOff, uint64_t(kTable[3]) * kBlock);
  EXPECT_EQ(d.count, kBlock);
  s.kind = SegmentKind::RingScatter;
  const StepDesc r = segmentStep(s, kTable, 0);  // sends the block of position 3
  EXPECT_EQ(r.srcOff, uint64_t(kTable[3]) * kBlock);
}

TEST(Segment, SingleRankRingDoesNotCrash) {
  const Segment s = ringSegment(SegmentKind::RingAllReduce, 1, 0, 5, 100, 30);
  ASSERT_EQ(segmentSteps(s), 4u);
  uint64_t total = 0;
  for (uint64_t i = 0; i < segmentSteps(s); ++i) total += segmentStep(s, nullptr, i).count;
  EXPECT_EQ(total, 100u);
}

TEST(Segment, SingleStepFollowsItsConnectorsAndFlags) {
  Segment s;
  s.begin = (uint64_t(1) << 33) + 5;
  s.count = 77;
  s.conn[1] = 4;  // second receive slot
  s.conn[2] = 6;  // first send slot
  s.flags = kSegHasSrc | kSegPreSrc | kSegDirect;
  ASSERT_EQ(segmentSteps(s), 1u);
  const StepDesc d = segmentStep(s, nullptr, 0);
  EXPECT_EQ(d.nRecv, 1);
  EXPECT_EQ(d.recv[0], 4);
  EXPECT_EQ(d.nSend, 1);
  EXPECT_EQ(d.send[0], 6);
  EXPECT_EQ(d.input, StepInput::Src);
  EXPECT_EQ(d.srcOff, s.begin);
  EXPECT_EQ(d.dstOff, kNoBuffer);
  EXPECT_EQ(d.preSrc, 1);
  EXPECT_EQ(d.post, 0);
  EXPECT_EQ(d.direct, 1);
  EXPECT_EQ(d.count, 77u);
  s.flags = kSegHasDst | kSegPost;
  const StepDesc o = segmentStep(s, nullptr, 0);
  EXPECT_EQ(o.input, StepInput::None);
  EXPECT_EQ(o.dstOff, s.begin);
  EXPECT_EQ(o.post, 1);
  EXPECT_EQ(o.preSrc, 0);
  EXPECT_EQ(o.direct, 0);
  s.count = 0;
  EXPECT_EQ(segmentSteps(s), 0u);
}

// --- asBytes -----------------------------------------------------------------------

TEST(Segment, AsBytesConvertsSingleSegmentsOnce) {
  Segment s;
  s.kind = SegmentKind::Single;
  s.begin = 10;
  s.count = (uint64_t(1) << 31) + 3;
  s.flags = kSegHasSrc;
  const Segment b = asBytes(s, 8);
  EXPECT_EQ(b.begin, 80u);
  EXPECT_EQ(b.count, ((uint64_t(1) << 31) + 3) * 8);
  EXPECT_EQ(b.flags, kSegHasSrc | kSegBytes);
  const Segment again = asBytes(b, 8);
  EXPECT_EQ(again.begin, b.begin);
  EXPECT_EQ(again.count, b.count);
  EXPECT_EQ(again.flags, b.flags);
}

TEST(Segment, AsBytesLeavesOtherKindsAlone) {
  for (SegmentKind k : {SegmentKind::RingAllReduce, SegmentKind::RingGather, SegmentKind::RingScatter,
                        SegmentKind::DirectPair, SegmentKind::Hier}) {
    Segment s = ringSegment(k, 4, 1, 12, 1000, 400);
    s.blockElems = 2000;
    const Segment b = asBytes(s, 4);
    EXPECT_EQ(b.begin, 12u) << segmentKindName(k);
    EXPECT_EQ(b.count, 1000u);
    EXPECT_EQ(b.roundElems, 400u);
    EXPECT_EQ(b.blockElems, 2000u);
    EXPECT_EQ(b.flags, 0);
  }
}

// --- usable at compile time --------------------------------------------------------

constexpr Segment kRing4 = [] {
  Segment s;
  s.kind = SegmentKind::RingAllReduce;
  s.count = 10;  // chunks [0,3) [3,6) [6,8) [8,10)
  s.roundElems = 10;
  s.nranks = 4;
  s.pos = 1;
  s.conn[0] = 0;
  s.conn[1] = 1;
  return s;
}();
static_assert(segmentSteps(kRing4) == 7);
static_assert(segmentStep(kRing4, nullptr, 0).nSend == 1 && segmentStep(kRing4, nullptr, 0).nRecv == 0);
static_assert(segmentStep(kRing4, nullptr, 0).count == 3 && segmentStep(kRing4, nullptr, 0).srcOff == 0);
static_assert(segmentStep(kRing4, nullptr, 0).dstOff == kNoBuffer);
static_assert(segmentStep(kRing4, nullptr, 3).dstOff == 3 && segmentStep(kRing4, nullptr, 3).post == 1);
static_assert(segmentStep(kRing4, nullptr, 6).nSend == 0 && segmentStep(kRing4, nullptr, 6).dstOff == 6);
static_assert(segmentStep(kRing4, nullptr, 6).count == 2);

constexpr int32_t kTable3[] = {2, 0, 1};
constexpr Segment kGather3 = [] {
  Segment s;
  s.kind = SegmentKind::RingGather;
  s.count = 5;
  s.roundElems = 5;
  s.blockElems = 100;
  s.nranks = 3;
  s.pos = 0;
  s.ringTable = 0;
  return s;
}();
static_assert(segmentSteps(kGather3) == 3);
static_assert(segmentStep(kGather3, kTable3, 0).dstOff == 200);  // own block: rank 2
static_assert(segmentStep(kGather3, kTable3, 1).dstOff == 100);  // position 2's: rank 1
static_assert(asBytes(Segment{}, 4).flags == kSegBytes);

TEST(Segment, CompileTimeStepsMatchRunTime) {
  uint64_t total = 0;
  for (uint64_t i = 0; i < segmentSteps(kRing4); ++i) total += segmentStep(kRing4, nullptr, i).count;
  // Every chunk once in each half, except this rank's own (3 elements),
  // which the turn step covers for both.
  EXPECT_EQ(total, 2 * kRing4.count - 3);
  EXPECT_EQ(segmentStep(kGather3, kTable3, 2).dstOff, 0u);  // position 1's: rank 0
}

}  // namespace
}  // namespace chorus::sched
