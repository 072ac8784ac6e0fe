// Range arithmetic (src/sched/chunking.h): splitEven and splitAligned must
// partition [0, total) exactly — contiguous, in order, no gaps, no overlap —
// for every part count up to 64 and awkward totals, because sender and
// receiver compute the same split independently.
#include "sched/chunking.h"

#include <gtest/gtest.h>

#include <vector>

namespace chorus::sched {
namespace {

const size_t kTotals[] = {0, 1, 2, 3, 7, 63, 64, 65, 1000, 1001, 4096, 65537, 393219, (size_t{1} << 32) + 5};
const size_t kAligns[] = {1, 2, 4, 8, 16, 32, 64, 256};

TEST(SchedChunking, SplitEvenPartitionsExactly) {
  for (size_t total : kTotals)
    for (int parts = 1; parts <= 64; ++parts) {
      size_t next = 0;
      size_t minCount = ~size_t{0}, maxCount = 0;
      for (int i = 0; i < parts; ++i) {
        const Range r = splitEven(total, parts, i);
        ASSERT_EQ(r.begin, next) << "total=" << total << " parts=" << parts << " part " << i;
        EXPECT_EQ(r.end(), r.begin + r.count);
        next = r.end();
        minCount = std::min(minCount, r.count);
        maxCount = std::max(maxCount, r.count);
        if (i > 0) {
          EXPECT_LE(r.count, splitEven(total, parts, i - 1).count) << "larger parts come first";
        }
      }
      EXPECT_EQ(next, total) << "total=" << total << " parts=" << parts;
      EXPECT_LE(maxCount - minCount, 1u) << "total=" << total << " parts=" << parts;
    }
}

TEST(SchedChunking, SplitAlignedPartitionsOnAlignedBoundaries) {
  for (size_t total : kTotals)
    for (size_t align : kAligns)
      for (int parts = 1; parts <= 64; ++parts) {
        size_t next = 0;
        for (int i = 0; i < parts; ++i) {
          const Range r = splitAligned(total, parts, i, align);
          ASSERT_EQ(r.begin, next) << "total=" << total << " align=" << align << " parts=" << parts << " part " << i;
          ASSERT_LE(r.end(), total);
          // Every boundary inside the range is aligned; only the end of the data may not be.
          EXPECT_EQ(r.begin % align == 0 || r.begin == total, true) << "part " << i << " begins at " << r.begin;
          EXPECT_TRUE(r.end() % align == 0 || r.end() == total) << "part " << i << " ends at " << r.end();
          next = r.end();
        }
        EXPECT_EQ(next, total) << "total=" << total << " align=" << align << " parts=" << parts;
      }
}

TEST(SchedChunking, SplitAlignedBalancesWholeUnits) {
  // Parts differ by at most one aligned unit (plus the short tail).
  for (size_t total : kTotals)
    for (size_t align : kAligns)
      for (int parts = 1; parts <= 64; ++parts) {
        size_t minUnits = ~size_t{0}, maxUnits = 0;
        for (int i = 0; i < parts; ++i) {
          const Range r = splitAligned(total, parts, i, align);
          const size_t units = (r.count + align - 1) / align;
          minUnits = std::min(minUnits, units);
          maxUnits = std::max(maxUnits, units);
        }
        EXPECT_LE(maxUnits - minUnits, 1u) << "total=" << total << " align=" << align << " parts=" << parts;
      }
}

TEST(SchedChunking, PieceCountIsCeiling) {
  for (size_t count : {0ul, 1ul, 7ul, 8ul, 9ul, 1000ul, 1024ul, 1025ul})
    for (size_t piece : {1ul, 8ul, 1024ul}) {
      const size_t n = pieceCount(count, piece);
      EXPECT_GE(n * piece, count);
      if (n > 0) {
        EXPECT_LT((n - 1) * piece, count);
      } else {
        EXPECT_EQ(count, 0u);
      }
    }
}

TEST(SchedChunking, ModIsNonNegative) {
  for (int n = 1; n <= 64; ++n)
    for (int a = -3 * n; a <= 3 * n; ++a) {
      const int m = mod(a, n);
      EXPECT_GE(m, 0);
      EXPECT_LT(m, n);
      EXPECT_EQ((a - m) % n, 0);
    }
}

static_assert(splitEven(10, 3, 0).count == 4 && splitEven(10, 3, 2).begin == 7, "usable at compile time");

}  // namespace
}  // namespace chorus::sched
