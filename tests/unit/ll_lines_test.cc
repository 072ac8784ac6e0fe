// The LL line format (kernels/common/ll_lines.h), which only the lane kernel
// moves: flags are never 0 (zeroed slot memory) and never repeat between the
// pieces one slot holds in turn, also where the position wraps the flag
// period; a line carries its word and flag unchanged; a piece's lines fill
// at most the slot its size was chosen for (kernels/lane_plan.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "core/op_fingerprint.h"
#include "kernels/common/ll_lines.h"
#include "kernels/lane_plan.h"

namespace chorus {
namespace {

using step::kLLFlagPeriod;

TEST(LLLines, FlagsAreNeverZeroAndDifferAcrossTheWrap) {
  for (uint64_t k : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{1} << 20}) {
    const uint64_t wrap = k * kLLFlagPeriod;
    for (uint64_t pos = wrap > 200 ? wrap - 200 : 0; pos < wrap + 200; ++pos) {
      EXPECT_NE(step::llFlag(pos), 0u) << pos;
      // The pieces a slot holds one after the other: positions nslots apart.
      for (uint32_t nslots = 2; nslots <= kMaxFifoSlots; nslots *= 2)
        EXPECT_NE(step::llFlag(pos), step::llFlag(pos + nslots)) << pos << " / " << nslots;
    }
  }
  EXPECT_EQ(step::llFlag(0), 1u);
  EXPECT_EQ(step::llFlag(kLLFlagPeriod - 1), 0xFFFFFFFFu);
  EXPECT_EQ(step::llFlag(kLLFlagPeriod), 1u) << "the period starts again at 1, skipping 0";
}

TEST(LLLines, ALineCarriesItsWordAndFlag) {
  for (uint32_t flag : {1u, 2u, 0x80000000u, 0xFFFFFFFFu})
    for (uint32_t word : {0u, 1u, 0xDEADBEEFu, 0xFFFFFFFFu}) {
      const uint64_t line = step::llLine(flag, word);
      EXPECT_EQ(step::llLineFlag(line), flag);
      EXPECT_EQ(step::llLineWord(line), word);
    }
  // A zeroed line never passes for data.
  EXPECT_NE(step::llLineFlag(0), step::llFlag(0));
}

TEST(LLLines, RaggedPiecesTakeWholeLines) {
  const uint32_t bytes[] = {1, 2, 3, 4, 5, 8, 9, 4095, 4096};
  const uint32_t lines[] = {1, 1, 1, 1, 2, 2, 3, 1024, 1024};
  for (size_t i = 0; i < std::size(bytes); ++i) {
    EXPECT_EQ(step::llLines(bytes[i]), lines[i]) << bytes[i];
    EXPECT_EQ(step::llLineBytes(bytes[i]), uint64_t{lines[i]} * 8) << bytes[i];
  }
  EXPECT_EQ(step::llLines(0), 0u);
  EXPECT_EQ(step::llLines(0xFFFFFFFFu), 0x40000000u) << "no overflow at the largest size";
}

TEST(LLLines, APiecesLinesFitTheSlotItWasSizedFor) {
  for (uint32_t slot = 64; slot <= (1u << 20); slot += 64) {
    const uint32_t piece = dev::llPieceBytes(slot);
    EXPECT_LE(step::llLineBytes(piece), slot) << slot;
    EXPECT_LE(piece, dev::kLLMaxPieceBytes) << slot;
    EXPECT_GT(piece, 0u) << slot;
  }
}

}  // namespace
}  // namespace chorus
