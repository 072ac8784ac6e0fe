// The device element-wise loop's split of n elements between threads
// (kernels/common/elementwise_split.h, called by combineRange in
// kernels/primitives/elementwise.cuh), run here for every thread of a block
// or grid: with and without vector accesses, for every pack size the kernel
// instantiates (16-byte packs of 1-, 2-, 4- and 8-byte elements), both
// unroll depths, block-sized and grid-sized strides and ragged counts, every
// element is touched by exactly one thread exactly once, and packs are only
// used where the whole pack lies inside the range.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/common/elementwise_split.h"

namespace chorus {
namespace {

// Runs the split for threads 0..stride-1 and counts the touches per element.
template <int E, int U>
std::vector<int> touches(uint64_t n, bool vec, uint64_t stride, bool* packOutside) {
  std::vector<int> count(n, 0);
  auto touchPack = [&](uint64_t p) {
    if ((p + 1) * E > n) {
      *packOutside = true;
      return;
    }
    for (uint64_t e = 0; e < E; ++e) ++count[p * E + e];
  };
  for (uint64_t first = 0; first < stride; ++first)
    step::splitElementwise<E, U>(
        n, vec, first, stride,
        [&](uint64_t p0) {
          for (uint64_t u = 0; u < U; ++u) touchPack(p0 + u * stride);
        },
        touchPack,
        [&](uint64_t i) {
          if (i >= n)
            *packOutside = true;
          else
            ++count[i];
        });
  return count;
}

template <int E, int U>
void expectEachElementOnce() {
  for (uint64_t stride : std::initializer_list<uint64_t>{1, 3, 32, 256, 512})
    for (uint64_t n : std::initializer_list<uint64_t>{0, 1, E - 1, E, E + 1, stride * U * E - 1, stride * U * E,
                                                      stride * U * E + 1, 2 * stride * U * E + 3 * E + 5, 5000})
      for (bool vec : {false, true}) {
        bool outside = false;
        const std::vector<int> count = touches<E, U>(n, vec, stride, &outside);
        EXPECT_FALSE(outside) << "E " << E << " U " << U << " stride " << stride << " n " << n << " vec " << vec;
        for (uint64_t i = 0; i < n; ++i)
          if (count[i] != 1) {
            ADD_FAILURE() << "element " << i << " touched " << count[i] << " times (E " << E << " U " << U << " stride "
                          << stride << " n " << n << " vec " << vec << ")";
            break;
          }
      }
}

TEST(ElementwiseSplit, EveryElementOnceForOneByteElements) { expectEachElementOnce<16, 2>(); }
TEST(ElementwiseSplit, EveryElementOnceForTwoByteElements) { expectEachElementOnce<8, 4>(); }
TEST(ElementwiseSplit, EveryElementOnceForFourByteElements) { expectEachElementOnce<4, 4>(); }
TEST(ElementwiseSplit, EveryElementOnceForEightByteElements) { expectEachElementOnce<2, 4>(); }

// A round's U packs of one thread are stride packs apart (the kernel's
// coalescing), and only whole rounds are taken as rounds.
TEST(ElementwiseSplit, RoundsAreWholeAndStrided) {
  const uint64_t stride = 32, n = 3 * stride * 4 * 4 + 7;  // three full rounds of 4-element packs, then a tail
  uint64_t rounds = 0, packs = 0, elems = 0;
  for (uint64_t first = 0; first < stride; ++first)
    step::splitElementwise<4, 4>(
        n, true, first, stride,
        [&](uint64_t p0) {
          ++rounds;
          EXPECT_EQ(p0 % (stride * 4), first);
        },
        [&](uint64_t) { ++packs; }, [&](uint64_t) { ++elems; });
  EXPECT_EQ(rounds, 3 * stride);
  EXPECT_EQ(packs, 1u) << "the one whole pack after the three rounds";
  EXPECT_EQ(elems, 3u);
}

}  // namespace
}  // namespace chorus
