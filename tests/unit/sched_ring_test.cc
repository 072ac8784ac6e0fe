// Ring schedules (src/sched/ring.h) checked by simulating them: every rank
// executes its step actions on symbolic data (which ranks' inputs a value
// holds), messages travel one hop per step, and the test checks that
//   * what rank r sends at step s is exactly what rank r+1 receives at step
//     s+1 (same chunk, nothing left in flight, nothing received from nowhere);
//   * reductions never add a rank's input twice, and every kept chunk of a
//     ReduceScatter / AllReduce is fully reduced, kept exactly once per rank;
//   * AllGather delivers every chunk to every rank exactly once, unmodified.
// A single rank has no ring to walk (the executors copy locally), so the
// flow checks start at two ranks.
#include "sched/ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::sched {
namespace {

constexpr int kMaxRanks = 64;

// A symbolic value: the set of ranks whose input it contains.
using Contrib = std::vector<bool>;

struct Message {
  int chunk;
  Contrib value;
};

struct RankState {
  std::vector<int> kept;              // times each chunk was written to the output
  std::vector<Contrib> output;        // the last value kept per chunk
};

bool receives(RingAction a) {
  return a != RingAction::Send && a != RingAction::CopySend;
}
bool sends(RingAction a) {
  return a == RingAction::Send || a == RingAction::RecvReduceSend || a == RingAction::RecvReduceCopySend ||
         a == RingAction::RecvCopySend || a == RingAction::CopySend;
}
bool reduces(RingAction a) {
  return a == RingAction::RecvReduceSend || a == RingAction::RecvReduceCopy || a == RingAction::RecvReduceCopySend;
}
bool keeps(RingAction a) {
  return a == RingAction::RecvReduceCopy || a == RingAction::RecvReduceCopySend || a == RingAction::RecvCopySend ||
         a == RingAction::Recv || a == RingAction::CopySend;
}

Contrib only(int rank, int n) {
  Contrib c(static_cast<size_t>(n), false);
  c[static_cast<size_t>(rank)] = true;
  return c;
}
bool full(const Contrib& c) {
  for (bool b : c)
    if (!b) return false;
  return true;
}

// Runs `steps` steps of a ring schedule and leaves every rank's final state
// in *out. Records gtest failures for flow violations.
template <typename StepFn>
void simulate(int n, int steps, StepFn stepOf, std::vector<RankState>* out) {
  std::vector<RankState>& st = *out;
  st.assign(static_cast<size_t>(n), RankState{});
  for (auto& s : st) {
    s.kept.assign(static_cast<size_t>(n), 0);
    s.output.assign(static_cast<size_t>(n), Contrib(static_cast<size_t>(n), false));
  }
  // inFlight[r]: the message rank r sent last step, to be received by r+1 now.
  std::vector<std::optional<Message>> inFlight(static_cast<size_t>(n));
  for (int step = 0; step < steps; ++step) {
    std::vector<std::optional<Message>> next(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const RingStep rs = stepOf(r, step);
      SCOPED_TRACE("n=" + std::to_string(n) + " rank=" + std::to_string(r) + " step=" + std::to_string(step));
      ASSERT_GE(rs.chunk, 0);
      ASSERT_LT(rs.chunk, n);
      std::optional<Message>& incoming = inFlight[static_cast<size_t>(ringPrev(r, n))];
      Contrib value;
      if (receives(rs.action)) {
        ASSERT_TRUE(incoming.has_value()) << "receives but rank " << ringPrev(r, n) << " sent nothing last step";
        ASSERT_EQ(incoming->chunk, rs.chunk) << "receives a different chunk than its predecessor sent";
        value = incoming->value;
        incoming.reset();
        if (reduces(rs.action)) {
          ASSERT_FALSE(value[static_cast<size_t>(r)]) << "own input reduced into the chunk twice";
          value[static_cast<size_t>(r)] = true;
        }
      } else {
        value = only(r, n);  // Send / CopySend start from this rank's own input
      }
      if (keeps(rs.action)) {
        st[static_cast<size_t>(r)].kept[static_cast<size_t>(rs.chunk)]++;
        st[static_cast<size_t>(r)].output[static_cast<size_t>(rs.chunk)] = value;
      }
      if (sends(rs.action)) next[static_cast<size_t>(r)] = Message{rs.chunk, value};
    }
    for (int r = 0; r < n; ++r)
      EXPECT_FALSE(inFlight[static_cast<size_t>(r)].has_value())
          << "n=" << n << " step " << step << ": rank " << ringNext(r, n) << " never received what rank " << r
          << " sent";
    inFlight = std::move(next);
  }
  for (int r = 0; r < n; ++r)
    EXPECT_FALSE(inFlight[static_cast<size_t>(r)].has_value())
        << "n=" << n << ": rank " << r << " sends at the last step and nobody receives it";
}

TEST(SchedRing, NextPrevAreInverse) {
  for (int n = 1; n <= kMaxRanks; ++n)
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ringPrev(ringNext(r, n), n), r);
      EXPECT_EQ(ringNext(ringPrev(r, n), n), r);
      EXPECT_GE(ringNext(r, n), 0);
      EXPECT_LT(ringNext(r, n), n);
    }
}

TEST(SchedRing, StepCounts) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    EXPECT_EQ(ringAllReduceSteps(n), 2 * n - 1);
    EXPECT_EQ(ringReduceScatterSteps(n), n);
    EXPECT_EQ(ringAllGatherSteps(n), n);
  }
}

TEST(SchedRing, AllReduceEveryChunkFullyReducedOncePerRank) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    std::vector<RankState> st;
    simulate(n, ringAllReduceSteps(n), [n](int r, int s) { return ringAllReduceStep(r, n, s); }, &st);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(st[r].kept[k], 1) << "n=" << n << " rank " << r << " chunk " << k;
        EXPECT_TRUE(full(st[r].output[k])) << "n=" << n << " rank " << r << " chunk " << k << " not fully reduced";
      }
  }
}

TEST(SchedRing, ReduceScatterRankKeepsOnlyItsChunkFullyReduced) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    std::vector<RankState> st;
    simulate(n, ringReduceScatterSteps(n), [n](int r, int s) { return ringReduceScatterStep(r, n, s); }, &st);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(st[r].kept[k], k == r ? 1 : 0) << "n=" << n << " rank " << r << " chunk " << k;
        if (k == r) {
          EXPECT_TRUE(full(st[r].output[k])) << "n=" << n << " rank " << r;
        }
      }
  }
}

TEST(SchedRing, AllGatherDeliversEveryChunkOnceUnmodified) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    std::vector<RankState> st;
    simulate(n, ringAllGatherSteps(n), [n](int r, int s) { return ringAllGatherStep(r, n, s); }, &st);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(st[r].kept[k], 1) << "n=" << n << " rank " << r << " chunk " << k;
        EXPECT_EQ(st[r].output[k], only(k, n)) << "n=" << n << " rank " << r << ": chunk " << k
                                               << " must be rank " << k << "'s data";
      }
  }
}

// Broadcast and Reduce are chains: one action per rank for the whole
// operation (data is pipelined in pieces, each piece following the chain).
TEST(SchedRing, BroadcastChainReachesEveryRankOnce) {
  for (int n = 2; n <= kMaxRanks; ++n)
    for (int root = 0; root < n; ++root) {
      // Walk the chain from the root: each hop must receive what the previous sent.
      EXPECT_EQ(ringBroadcastAction(root, root, n), RingAction::CopySend);
      int got = 1;
      int r = root;
      for (int hop = 1; hop < n; ++hop) {
        const RingAction prev = ringBroadcastAction(r, root, n);
        r = ringNext(r, n);
        const RingAction a = ringBroadcastAction(r, root, n);
        ASSERT_TRUE(sends(prev)) << "n=" << n << " root=" << root << " chain breaks before rank " << r;
        ASSERT_TRUE(receives(a) && keeps(a) && !reduces(a)) << "n=" << n << " rank " << r;
        ++got;
      }
      EXPECT_FALSE(sends(ringBroadcastAction(r, root, n))) << "the chain's last rank must not forward";
      EXPECT_EQ(ringNext(r, n), root);
      EXPECT_EQ(got, n);
    }
}

TEST(SchedRing, ReduceChainEndsFullyReducedAtRoot) {
  for (int n = 2; n <= kMaxRanks; ++n)
    for (int root = 0; root < n; ++root) {
      int r = ringNext(root, n);
      ASSERT_EQ(ringReduceAction(r, root, n), RingAction::Send) << "n=" << n << " root=" << root;
      Contrib value = only(r, n);
      for (int hop = 1; hop < n; ++hop) {
        r = ringNext(r, n);
        const RingAction a = ringReduceAction(r, root, n);
        ASSERT_TRUE(receives(a) && reduces(a)) << "n=" << n << " rank " << r;
        ASSERT_FALSE(value[static_cast<size_t>(r)]);
        value[static_cast<size_t>(r)] = true;
        EXPECT_EQ(keeps(a), r == root) << "n=" << n << " rank " << r << ": only the root keeps the result";
        EXPECT_EQ(sends(a), r != root) << "n=" << n << " rank " << r;
      }
      EXPECT_EQ(r, root);
      EXPECT_TRUE(full(value));
    }
}

}  // namespace
}  // namespace chorus::sched
