// The connector's counter rules (kernels/common/fifo_counters.h), which the
// host connectors, the network links and the kernels all follow: a sender
// and a receiver that act only when the rules allow never overwrite a slot
// that was not read, never read a slot that was not written, and lose nothing.
#include "kernels/common/fifo_counters.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace chorus::fifo {
namespace {

TEST(FifoCounters, ASenderMayRunAheadByExactlyTheSlots) {
  const uint32_t nslots = 4;
  for (uint64_t head = 0; head < 10; ++head) {
    for (uint64_t pos = head; pos < head + nslots; ++pos) EXPECT_TRUE(slotFree(pos, head, nslots)) << pos;
    EXPECT_FALSE(slotFree(head + nslots, head, nslots));
  }
}

TEST(FifoCounters, PublishedAndFreedAreStrictlyBehindTheCounter) {
  EXPECT_FALSE(slotPublished(0, 0));
  EXPECT_TRUE(slotPublished(0, 1));
  EXPECT_FALSE(slotPublished(1, 1));
  EXPECT_FALSE(slotFreed(5, 5));
  EXPECT_TRUE(slotFreed(5, 6));
  EXPECT_TRUE(allFreed(5, 5));
  EXPECT_FALSE(allFreed(6, 5));
  EXPECT_EQ(slotIndex(0, 3), 0u);
  EXPECT_EQ(slotIndex(7, 3), 1u);
  EXPECT_EQ(slotIndex(uint64_t(1) << 40, 64), 0u);
}

// A sender and a receiver interleaved at random, each acting only when the
// rules allow it, over a FIFO whose slots record which sequence number they
// hold: the receiver reads every message once and in order.
TEST(FifoCounters, RandomInterleavingsDeliverEveryMessageInOrder) {
  std::mt19937_64 rng(7);
  for (uint32_t nslots : {1u, 2u, 3u, 8u}) {
    std::vector<int64_t> slots(nslots, -1);
    uint64_t tail = 0, head = 0;
    const uint64_t messages = 2000;
    uint64_t received = 0;
    while (received < messages) {
      if (rng() % 2 == 0) {
        if (tail < messages && slotFree(tail, head, nslots)) {
          ASSERT_EQ(slots[slotIndex(tail, nslots)], -1) << "overwrote an unread slot";
          slots[slotIndex(tail, nslots)] = static_cast<int64_t>(tail);
          ++tail;
        }
      } else if (slotPublished(head, tail)) {
        ASSERT_EQ(slots[slotIndex(head, nslots)], static_cast<int64_t>(head)) << "read out of order";
        slots[slotIndex(head, nslots)] = -1;
        ++head;
        ++received;
      }
    }
    EXPECT_TRUE(allFreed(tail, head));
  }
}

}  // namespace
}  // namespace chorus::fifo
