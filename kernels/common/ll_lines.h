// The LL protocol's line format (kernels/lane_plan.h describes the protocol;
// kernels/primitives/fifo_device.cuh moves the lines). A piece of `bytes`
// payload bytes travels as ceil(bytes / 4) lines of 8 bytes: the low half
// holds 4 payload bytes (the last line's unused bytes are zero), the high
// half the flag of the piece, which a receiver compares to know the line
// arrived. The flag of the piece at FIFO position `pos` is never 0, the
// value of slot memory no piece has written yet, and the flags of the pieces
// a slot holds one after the other differ (positions nslots apart, at most
// kMaxFifoSlots), so a line left by an earlier piece is never taken for one
// of the current piece, even after the position passes 2^32.
#pragma once

#include <cstdint>

#include "kernels/common/compiler.h"

namespace chorus::step {

// Flags run from 1 to 2^32 - 1 and then start again at 1.
inline constexpr uint64_t kLLFlagPeriod = 0xFFFFFFFFull;

CHORUS_HD CHORUS_INLINE constexpr uint32_t llFlag(uint64_t pos) {
  return static_cast<uint32_t>(pos % kLLFlagPeriod) + 1;
}

// Lines a piece of `bytes` payload bytes takes, and the slot bytes they fill.
CHORUS_HD CHORUS_INLINE constexpr uint32_t llLines(uint32_t bytes) { return bytes / 4 + (bytes % 4 != 0 ? 1 : 0); }
CHORUS_HD CHORUS_INLINE constexpr uint64_t llLineBytes(uint32_t bytes) { return uint64_t{llLines(bytes)} * 8; }

CHORUS_HD CHORUS_INLINE constexpr uint64_t llLine(uint32_t flag, uint32_t word) {
  return (static_cast<uint64_t>(flag) << 32) | word;
}
CHORUS_HD CHORUS_INLINE constexpr uint32_t llLineFlag(uint64_t line) { return static_cast<uint32_t>(line >> 32); }
CHORUS_HD CHORUS_INLINE constexpr uint32_t llLineWord(uint64_t line) { return static_cast<uint32_t>(line); }

}  // namespace chorus::step
