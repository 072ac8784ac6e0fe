// CHORUS_TIMEOUT_MS / CHORUS_INIT_TIMEOUT_MS normalisation (core/wait_limit.h):
// 0 and negative mean no limit, huge values saturate, deadlines never overflow.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/store.h"
#include "common/rank_runner.h"
#include "core/comm_config.h"
#include "core/rank_placement.h"
#include "core/wait_limit.h"

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;

TEST(WaitLimit, ZeroAndNegativeMeanNoLimit) {
  EXPECT_EQ(normalizeWaitLimitMs(0), 0);
  EXPECT_EQ(normalizeWaitLimitMs(-1), 0);
  EXPECT_EQ(normalizeWaitLimitMs(std::numeric_limits<int64_t>::min()), 0);
  EXPECT_EQ(deadlineAfterLimit(0), Clock::time_point::max());
  EXPECT_EQ(deadlineAfterLimit(-5), Clock::time_point::max());
  EXPECT_TRUE(waitUnbounded(waitBoundLimit(0)));
  EXPECT_FALSE(waitUnbounded(waitBoundLimit(10)));
}

TEST(WaitLimit, HugeValuesSaturateWithoutOverflow) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(normalizeWaitLimitMs(big), kMaxWaitLimitMs);
  const auto now = Clock::now();
  const auto d = deadlineAfterLimit(big, now);
  EXPECT_GT(d, now + std::chrono::hours(24 * 365 * 30));  // decades away, not in the past
  EXPECT_GT(deadlineAfterMs(big, now), now);
  EXPECT_EQ(deadlineAfterMs(-3, now), now);
  // GPU kernels take the limit in ns: it still fits in 64 bits.
  EXPECT_LT(static_cast<uint64_t>(kMaxWaitLimitMs), UINT64_MAX / 1000000ull);
}

TEST(WaitLimit, SmallValuesStayExact) {
  EXPECT_EQ(normalizeWaitLimitMs(1), 1);
  EXPECT_EQ(normalizeWaitLimitMs(2000), 2000);
  const auto now = Clock::now();
  EXPECT_EQ(deadlineAfterLimit(2000, now), now + std::chrono::milliseconds(2000));
}

TEST(WaitLimit, CommConfigReadsTheKnobsThisWay) {
  struct Row {
    const char* value;
    int64_t want;
  };
  for (const Row& r :
       {Row{"", 0}, Row{"0", 0}, Row{"-1", 0}, Row{"9223372036854775807", kMaxWaitLimitMs}, Row{"1500", 1500}}) {
    test::ScopedEnv env({{"CHORUS_TIMEOUT_MS", r.value}, {"CHORUS_INIT_TIMEOUT_MS", r.value}});
    CommConfig c;
    ASSERT_EQ(resolveCommConfig(nullptr, nullptr, &c), ncclSuccess);
    EXPECT_EQ(c.timeoutMs, r.want) << "CHORUS_TIMEOUT_MS=" << r.value;
    EXPECT_EQ(c.initTimeoutMs, r.want) << "CHORUS_INIT_TIMEOUT_MS=" << r.value;
  }
}

// Two "hosts" (NCCL_HOSTID) of one machine: the transports see two ranks
// per host, the spin rule all four, since they share the machine's CPUs.
TEST(RankPlacement, HostsOfOneMachineCountTogetherAndHostsStayApart) {
  std::vector<PeerInfo> peers(6);
  const uint64_t hosts[6] = {0xa, 0xa, 0xb, 0xb, 0xc, 0xc};
  const uint64_t machines[6] = {0x1, 0x1, 0x1, 0x1, 0x2, 0x2};
  for (int r = 0; r < 6; ++r) {
    peers[r].rank = r;
    peers[r].hostHash = hosts[r];
    peers[r].machineHash = machines[r];
  }
  const RankPlacement third = placeRank(peers, peers[3]);
  EXPECT_EQ(third.localRank, 1);
  EXPECT_EQ(third.localNRanks, 2);
  EXPECT_EQ(third.machineNRanks, 4);
  const RankPlacement fifth = placeRank(peers, peers[4]);
  EXPECT_EQ(fifth.localRank, 0);
  EXPECT_EQ(fifth.localNRanks, 2);
  EXPECT_EQ(fifth.machineNRanks, 2);
  EXPECT_EQ(autoSpinCount(third.machineNRanks, 2), 0) << "4 ranks on 2 CPUs yield";
  EXPECT_EQ(autoSpinCount(fifth.machineNRanks, 2), kDefaultSpinCount);
}

// CHORUS_SPIN_COUNT unset: 500 polls, none once the machine's ranks outnumber
// its CPUs; a value the user set is kept whatever the placement.
TEST(SpinCount, UnsetYieldsAtOnceWhereRanksOutnumberCpusAndSetValuesStay) {
  EXPECT_EQ(autoSpinCount(2, 2), kDefaultSpinCount);
  EXPECT_EQ(autoSpinCount(3, 2), 0);
  EXPECT_EQ(autoSpinCount(64, 0), kDefaultSpinCount) << "unknown CPU count";
  {
    test::ScopedEnv env(std::vector<std::pair<std::string, std::string>>{{"CHORUS_SPIN_COUNT", ""}});
    CommConfig c;
    ASSERT_EQ(resolveCommConfig(nullptr, nullptr, &c), ncclSuccess);
    EXPECT_TRUE(c.spinCountAuto);
    EXPECT_EQ(c.spinCount, kDefaultSpinCount);
  }
  for (const char* v : {"0", "100"}) {
    test::ScopedEnv env(std::vector<std::pair<std::string, std::string>>{{"CHORUS_SPIN_COUNT", v}});
    CommConfig c;
    ASSERT_EQ(resolveCommConfig(nullptr, nullptr, &c), ncclSuccess);
    EXPECT_FALSE(c.spinCountAuto) << v;
    EXPECT_EQ(c.spinCount, std::stoll(v));
  }
}

}  // namespace
}  // namespace chorus
