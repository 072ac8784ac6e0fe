// GPU executor decisions that need no GPU (src/gpu/launch_policy.cc): blocks
// per launch when ranks share a GPU, channel defaults, and the stream layouts
// that would make co-resident ranks' kernels wait for each other forever.
#include <gtest/gtest.h>

#include <string>

#include "gpu/launch_policy.h"

namespace chorus::gpu {
namespace {

TEST(GpuLaunchPolicy, RanksSharingAGpuSplitItsSms) {
  EXPECT_EQ(lanesPerLaunch(132, 1, 64), 64);  // one rank: the launch limit
  EXPECT_EQ(lanesPerLaunch(132, 2, 64), 64);
  EXPECT_EQ(lanesPerLaunch(132, 4, 64), 33);
  EXPECT_EQ(lanesPerLaunch(132, 8, 64), 16);
  EXPECT_EQ(lanesPerLaunch(132, 200, 64), 1) << "always at least one block";
  EXPECT_EQ(lanesPerLaunch(132, 0, 64), 64) << "an unknown count means the rank is alone";
  // Whatever the counts, all ranks' blocks fit on the SMs at once.
  for (int ranks = 1; ranks <= 132; ++ranks) EXPECT_LE(lanesPerLaunch(132, ranks, 64) * ranks, 132) << ranks;
}

TEST(GpuLaunchPolicy, DefaultChannelsShrinkToFitAndUserChoicesAreCapped) {
  CommConfig cfg;  // host defaults: 1..2, nothing chosen
  fitChannels(64, 16, &cfg);
  EXPECT_EQ(cfg.maxChannels, 16);
  fitChannels(16, 16, &cfg);  // 8 ranks on a 132-SM GPU
  EXPECT_EQ(cfg.maxChannels, 8) << "a tree channel's two lanes must fit";

  CommConfig chosen;
  chosen.maxChannels = 24;
  chosen.minChannels = 24;
  chosen.maxChannelsChosen = true;
  fitChannels(64, 16, &chosen);
  EXPECT_EQ(chosen.maxChannels, 24) << "a user choice that fits is kept";
  fitChannels(10, 16, &chosen);
  EXPECT_EQ(chosen.maxChannels, 10);
  EXPECT_EQ(chosen.minChannels, 10) << "min never exceeds max";
}

StreamUse use(int rank, int device, std::vector<StreamUse::Stream> streams) {
  StreamUse u;
  u.rank = rank;
  u.device = device;
  u.streams = std::move(streams);
  return u;
}

TEST(GpuLaunchPolicy, DistinctNonBlockingStreamsAreFine) {
  EXPECT_EQ(findSerializedRanks({use(0, 0, {{0x10, false, false}}), use(1, 0, {{0x20, false, false}})}), "");
  // Blocking streams are fine among themselves; only the legacy stream joins them.
  EXPECT_EQ(findSerializedRanks({use(0, 0, {{0x10, false, true}}), use(1, 0, {{0x20, false, true}})}), "");
  // Different GPUs never serialize each other's kernels.
  EXPECT_EQ(findSerializedRanks({use(0, 0, {{0, true, true}}), use(1, 1, {{0, true, true}})}), "");
}

TEST(GpuLaunchPolicy, SharedOrLegacyJoinedStreamsOnOneGpuAreNamed) {
  std::string why = findSerializedRanks({use(0, 0, {{0x10, false, false}}), use(1, 0, {{0x10, false, false}})});
  EXPECT_NE(why.find("ranks 0 and 1 of GPU 0"), std::string::npos) << why;
  EXPECT_NE(why.find("same CUDA stream"), std::string::npos) << why;

  why = findSerializedRanks({use(0, 0, {{0, true, true}}), use(1, 0, {{0x20, false, true}})});
  EXPECT_NE(why.find("legacy default stream and a blocking stream"), std::string::npos) << why;

  // A rank's second stream counts too (its tasks ran on two streams).
  why = findSerializedRanks(
      {use(0, 0, {{0x10, false, false}, {0x30, false, false}}), use(3, 0, {{0x30, false, false}})});
  EXPECT_NE(why.find("ranks 0 and 3"), std::string::npos) << why;
}

}  // namespace
}  // namespace chorus::gpu
