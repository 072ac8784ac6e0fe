// Host half of the device API (src/api/device_api.cc): the arithmetic must
// match what NCCL's device-side headers expect, and the unsupported parts must
// fail cleanly.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "chorus/nccl_device_host.h"
#include "nccl.h"

namespace {

TEST(DeviceApi, LsaBarrierRequirement) {
  ncclLsaBarrierHandle_t handle;
  ncclDevResourceRequirements_t req;
  std::memset(&req, 0xff, sizeof(req));  // everything not set must come back zeroed
  ncclTeam_t team = {8, 3, 1};
  ASSERT_EQ(ncclLsaBarrierCreateRequirement(team, 5, &handle, &req), ncclSuccess);
  EXPECT_EQ(handle.nBarriers, 5);
  EXPECT_EQ(req.bufferSize, (3 * 5 + 5 * 8) * sizeof(uint32_t));
  EXPECT_EQ(req.bufferAlign, alignof(uint32_t));
  EXPECT_EQ(req.outBufferHandle, &handle.bufHandle);
  EXPECT_EQ(req.next, nullptr);
  EXPECT_EQ(req.ginSignalCount, 0);
  EXPECT_EQ(req.outGinSignalStart, nullptr);
}

TEST(DeviceApi, LLA2ARequirementAndSlots) {
  EXPECT_EQ(ncclLLA2ACalcSlots(100, 8), 100);
  EXPECT_EQ(ncclLLA2ACalcSlots(100, 9), 200);
  EXPECT_EQ(ncclLLA2ACalcSlots(7, 16), 14);
  EXPECT_EQ(ncclLLA2ACalcSlots(0, 16), 0);
  EXPECT_EQ(pncclLLA2ACalcSlots(3, 4), 3);

  ncclLLA2AHandle_t handle;
  ncclDevResourceRequirements_t req;
  ASSERT_EQ(ncclLLA2ACreateRequirement(4, 32, &handle, &req), ncclSuccess);
  EXPECT_EQ(handle.nSlots, 32u);
  EXPECT_EQ(req.bufferSize, 4u * (1 + 2 * 32) * 16);
  EXPECT_EQ(req.bufferAlign, 16u);
  EXPECT_EQ(req.outBufferHandle, &handle.bufHandle);
}

TEST(DeviceApi, RequirementArgumentChecks) {
  ncclLsaBarrierHandle_t handle;
  ncclDevResourceRequirements_t req;
  EXPECT_EQ(ncclLsaBarrierCreateRequirement({4, 0, 1}, -1, &handle, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement({4, 0, 1}, 1, nullptr, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLsaBarrierCreateRequirement({0, 0, 1}, 1, &handle, &req), ncclInvalidArgument);
  ncclLLA2AHandle_t ll;
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, -2, &ll, &req), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, 1, &ll, nullptr), ncclInvalidArgument);
}

TEST(DeviceApi, InvalidCommunicator) {
  ncclTeam_t t = ncclTeamWorld(nullptr);
  EXPECT_EQ(t.nRanks, 0);
  EXPECT_EQ(t.rank, -1);
  EXPECT_EQ(ncclTeamRankToWorld(nullptr, ncclTeam_t{1, 0, 1}, 0), -1);
  EXPECT_EQ(ncclDevCommCreate(nullptr, nullptr, nullptr), ncclInvalidArgument);
}

// Four host-mode ranks in one process: one node, so lsa == world and the
// rail has a single member.
TEST(DeviceApi, TeamsOfAHostCommunicator) {
  ASSERT_EQ(chorusSetDefaultMode(chorusModeHost), ncclSuccess);
  constexpr int kRanks = 4;
  std::vector<ncclComm_t> comms(kRanks, nullptr);
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, nullptr), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    int rank = -1;
    ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    ncclTeam_t world = ncclTeamWorld(comms[r]);
    EXPECT_EQ(world.nRanks, kRanks);
    EXPECT_EQ(world.rank, rank);
    EXPECT_EQ(world.stride, 1);
    ncclTeam_t lsa = pncclTeamLsa(comms[r]);
    EXPECT_EQ(lsa.nRanks, kRanks);
    EXPECT_EQ(lsa.rank, rank);
    EXPECT_EQ(lsa.stride, 1);
    ncclTeam_t rail = ncclTeamRail(comms[r]);
    EXPECT_EQ(rail.nRanks, 1);
    EXPECT_EQ(rail.rank, 0);
    EXPECT_EQ(rail.stride, kRanks);
    EXPECT_EQ(ncclTeamRankToWorld(comms[r], world, 2), 2);
    EXPECT_EQ(ncclTeamRankToLsa(comms[r], lsa, 1), 1);

    ncclGinBarrierHandle_t gin;
    ncclDevResourceRequirements_t req;
    ASSERT_EQ(ncclGinBarrierCreateRequirement(comms[r], rail, 3, &gin, &req), ncclSuccess);
    EXPECT_EQ(req.bufferSize, 3u * 4 * sizeof(uint32_t));
    EXPECT_EQ(req.ginSignalCount, 3);
    EXPECT_EQ(req.outGinSignalStart, &gin.signal0);

    ncclDevCommRequirements_t reqs;
    std::memset(&reqs, 0, sizeof(reqs));
    EXPECT_EQ(ncclDevCommCreate(comms[r], &reqs, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::strstr(ncclGetLastError(comms[r]), "not supported by Chorus"), nullptr)
        << ncclGetLastError(comms[r]);
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
