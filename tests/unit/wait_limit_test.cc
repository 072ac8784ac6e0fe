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
  EXPECT_EQ(third.mostHostNRanks, 2);
  EXPECT_EQ(fifth.mostHostNRanks, 2);
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

// Every rank learns how many ranks the fullest host holds, whichever host it is on.
TEST(RankPlacement, EveryRankSeesTheFullestHost) {
  std::vector<PeerInfo> peers(4);
  const uint64_t hosts[4] = {0xa, 0xb, 0xc, 0xb};
  for (int r = 0; r < 4; ++r) {
    peers[r].rank = r;
    peers[r].hostHash = hosts[r];
  }
  for (const PeerInfo& p : peers) EXPECT_EQ(placeRank(peers, p).mostHostNRanks, 2) << "rank " << p.rank;
  peers[3].hostHash = 0xd;
  for (const PeerInfo& p : peers) EXPECT_EQ(placeRank(peers, p).mostHostNRanks, 1) << "rank " << p.rank;
}

// Collective slots widen only where every connector is a network link.
TEST(SlotBytes, CollectivesWidenOnlyWhereEveryHostHoldsOneRank) {
  EXPECT_EQ(slotBytesForPlacement(2, 1), kAcrossHostsSlotBytes);
  EXPECT_EQ(slotBytesForPlacement(64, 1), kAcrossHostsSlotBytes);
  EXPECT_EQ(slotBytesForPlacement(4, 2), kBaseSlotBytes) << "shared-memory hops keep small pieces";
  EXPECT_EQ(slotBytesForPlacement(1, 1), kBaseSlotBytes) << "a single rank has no connector";
}

CommConfig slotConfig(const char* slotBytes, const char* buffSize, const char* slots = "") {
  test::ScopedEnv env(std::vector<std::pair<std::string, std::string>>{
      {"CHORUS_SLOT_BYTES", slotBytes}, {"NCCL_BUFFSIZE", buffSize}, {"CHORUS_SLOTS", slots}});
  CommConfig c;
  EXPECT_EQ(resolveCommConfig(nullptr, nullptr, &c), ncclSuccess) << slotBytes << " " << buffSize;
  return c;
}

// Unset, the placement decides; CHORUS_SLOT_BYTES, else NCCL_BUFFSIZE over
// the slots, fixes one size for every connector.
TEST(SlotBytes, TheUsersChoiceFixesEverySlotAndNcclBuffSizeIsSplitOverTheSlots) {
  CommConfig c = slotConfig("", "");
  EXPECT_TRUE(c.slotBytesAuto);
  EXPECT_EQ(c.slotBytes, kBaseSlotBytes);
  EXPECT_EQ(c.collSlotBytes, kBaseSlotBytes);
  c = slotConfig("65536", "");
  EXPECT_FALSE(c.slotBytesAuto);
  EXPECT_EQ(c.slotBytes, 65536u);
  EXPECT_EQ(c.collSlotBytes, 65536u);
  c = slotConfig("", "1048576");
  EXPECT_FALSE(c.slotBytesAuto);
  EXPECT_EQ(c.collSlotBytes, 131072u) << "8 slots";
  c = slotConfig("", "1048576", "4");
  EXPECT_EQ(c.slotBytes, 262144u);
  EXPECT_EQ(c.collSlotBytes, 262144u);
  c = slotConfig("65536", "4194304");
  EXPECT_EQ(c.collSlotBytes, 65536u) << "CHORUS_SLOT_BYTES wins";
  for (const auto& [slot, fifo] : {std::pair{"-1", ""}, std::pair{"", "-4096"}}) {
    test::ScopedEnv env(
        std::vector<std::pair<std::string, std::string>>{{"CHORUS_SLOT_BYTES", slot}, {"NCCL_BUFFSIZE", fifo}});
    CommConfig bad;
    EXPECT_EQ(resolveCommConfig(nullptr, nullptr, &bad), ncclInvalidArgument) << slot << fifo;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(*slot ? "CHORUS_SLOT_BYTES" : "NCCL_BUFFSIZE"),
              std::string::npos)
        << ncclGetLastError(nullptr);
  }
}

}  // namespace
}  // namespace chorus
