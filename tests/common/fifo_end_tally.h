// What the GPU translation tests check across ranks: every FIFO the
// translated launches of all ranks name appears exactly once as a send end
// and once as a receive end. Each rank hands in the position counters its
// gpu::PositionFor gave out, keyed by (FIFO control block, sender side).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace chorus::test {

class FifoEndTally {
 public:
  using Positions = std::map<std::pair<const void*, bool>, uint64_t>;

  // One rank's ends (thread-safe).
  void add(const Positions& positions) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : positions) {
      auto& e = ends_[entry.first.first];
      (entry.first.second ? e.first : e.second) += 1;
    }
  }

  // After every rank added its ends.
  void expectEachFifoPairedOnce() const {
    ASSERT_FALSE(ends_.empty()) << "no FIFO at all";
    for (const auto& [fifo, e] : ends_) {
      EXPECT_EQ(e.first, 1) << "FIFO " << fifo << " has " << e.first << " send ends";
      EXPECT_EQ(e.second, 1) << "FIFO " << fifo << " has " << e.second << " receive ends";
    }
  }

 private:
  std::mutex mutex_;
  std::map<const void*, std::pair<int, int>> ends_;  // FIFO -> (send ends, receive ends)
};

}  // namespace chorus::test
