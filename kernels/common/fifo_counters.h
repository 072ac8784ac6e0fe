// The connector's counter rules, written once for every party that moves a
// FIFO's counters: the host connectors (src/transport/fifo.h, which
// describes the slot protocol), the network links that stand in for a
// remote end (transports/net/), and the kernels (fifo_device.cuh). Counters
// only grow; `pos` is the sequence number of a slot (its position counted
// from the FIFO's start, not wrapped). How each party loads and stores the
// counters (std::atomic on the host, system-scope atomics on the GPU) stays
// with it; what a value means is decided here.
#pragma once

#include <cstdint>

#include "kernels/common/compiler.h"

namespace chorus::fifo {

// The sender may fill slot `pos` once the receiver freed the slot that last
// held that position: fewer than nslots slots are outstanding.
CHORUS_HD CHORUS_INLINE bool slotFree(uint64_t pos, uint64_t head, uint32_t nslots) { return pos - head < nslots; }

// The receiver may read slot `pos` once the sender published it.
CHORUS_HD CHORUS_INLINE bool slotPublished(uint64_t pos, uint64_t tail) { return pos < tail; }

// The receiver has freed slot `pos` (it no longer reads it, or the sender's
// buffer a descriptor in it pointed at).
CHORUS_HD CHORUS_INLINE bool slotFreed(uint64_t pos, uint64_t head) { return pos < head; }

// Every slot before `posted` has been freed: the sender has nothing outstanding.
CHORUS_HD CHORUS_INLINE bool allFreed(uint64_t posted, uint64_t head) { return head >= posted; }

// Where slot `pos` lives among the nslots (and its entry in per-slot arrays).
CHORUS_HD CHORUS_INLINE uint32_t slotIndex(uint64_t pos, uint32_t nslots) {
  return static_cast<uint32_t>(pos % nslots);
}

}  // namespace chorus::fifo
