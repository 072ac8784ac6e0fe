// Host half of the NCCL 2.28 device API (include/chorus/nccl_device_host.h).
//
// NVIDIA's libnccl.so.2 exports these functions, so a drop-in replacement must
// too, or programs linked against it fail to load. The pieces that are pure
// arithmetic (teams, requirement sizes) are implemented for real so that host
// code preparing a device communicator behaves as it would with NCCL; creating
// the device communicator itself needs symmetric GPU memory, which Chorus does
// not provide yet, so that step reports ncclInvalidUsage.
//
// The sizes below follow the memory layout NCCL's device-side headers expect:
//  - LSA barrier: 3 control words per barrier plus one inbox word per barrier
//    and team member, all 32-bit.
//  - GIN barrier: one 32-bit epoch per barrier and GIN context, and one signal
//    per barrier.
//  - LL all-to-all: per block one 16-byte header line plus two epochs' worth of
//    16-byte slot lines (each line carries 8 payload bytes and 8 flag bytes).

#include <cstring>

#include "api/export.h"
#include "chorus/nccl_device_host.h"
#include "core/comm_query.h"
#include "core/log.h"
#include "core/result.h"

namespace chorus {
namespace {

// Contexts a device communicator may use for GPU-initiated networking.
constexpr size_t kGinMaxContexts = 4;
// One LL line: 8 payload bytes + 8 flag bytes.
constexpr size_t kLLLineBytes = 16;
constexpr size_t kLLPayloadBytes = 8;

// What a team function returns for a communicator it cannot query.
constexpr ncclTeam_t kEmptyTeam = {0, -1, 0};

bool validTeam(const ncclTeam_t& team) {
  return team.nRanks > 0 && team.rank >= 0 && team.rank < team.nRanks && team.stride != 0;
}

ncclResult_t checkRequirementArgs(const char* fn, int count, const void* outHandle, const void* outReq) {
  if (count < 0) return fail(ncclInvalidArgument, "%s: negative count %d", fn, count);
  if (outHandle == nullptr || outReq == nullptr)
    return fail(ncclInvalidArgument, "%s: outHandle and outReq must not be NULL", fn);
  return ncclSuccess;
}

ncclResult_t deviceApiUnsupported(const char* fn) {
  return fail(ncclInvalidUsage, "%s: the NCCL device API is not supported by Chorus yet (see docs/api.md)", fn);
}

}  // namespace
}  // namespace chorus

using chorus::fail;

CHORUS_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                             ncclDevComm_t* outDevComm) try {
  CHORUS_CHECK(chorus::checkComm(comm, "ncclDevCommCreate"));
  return chorus::deviceApiUnsupported("ncclDevCommCreate");
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclDevCommCreate)

CHORUS_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) try {
  CHORUS_CHECK(chorus::checkComm(comm, "ncclDevCommDestroy"));
  return chorus::deviceApiUnsupported("ncclDevCommDestroy");
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclDevCommDestroy)

CHORUS_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  if (chorus::checkComm(comm, "ncclTeamWorld") != ncclSuccess) return chorus::kEmptyTeam;
  return ncclTeam_t{chorus::commNRanks(comm), chorus::commRank(comm), 1};
}
CHORUS_EXPORT_ALIAS(ncclTeamWorld)

// The lsa team is the ranks of this node; like NCCL we assume they are
// consecutive world ranks, hence stride 1.
CHORUS_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  if (chorus::checkComm(comm, "ncclTeamLsa") != ncclSuccess) return chorus::kEmptyTeam;
  return ncclTeam_t{chorus::commLocalNRanks(comm), chorus::commLocalRank(comm), 1};
}
CHORUS_EXPORT_ALIAS(ncclTeamLsa)

// The rail is the outer factor of world by the lsa size: the ranks with this
// rank's local index, one per node.
CHORUS_EXPORT ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  if (chorus::checkComm(comm, "ncclTeamRail") != ncclSuccess) return chorus::kEmptyTeam;
  int lsaSize = chorus::commLocalNRanks(comm);
  if (lsaSize <= 0) lsaSize = 1;
  return ncclTeam_t{chorus::commNRanks(comm) / lsaSize, chorus::commRank(comm) / lsaSize, lsaSize};
}
CHORUS_EXPORT_ALIAS(ncclTeamRail)

CHORUS_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (chorus::checkComm(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
  return chorus::commRank(comm) + (rank - team.rank) * team.stride;
}
CHORUS_EXPORT_ALIAS(ncclTeamRankToWorld)

CHORUS_EXPORT int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (chorus::checkComm(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
  return chorus::commLocalRank(comm) + (rank - team.rank) * team.stride;
}
CHORUS_EXPORT_ALIAS(ncclTeamRankToLsa)

CHORUS_EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                           ncclLsaBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq) try {
  const char* fn = "ncclLsaBarrierCreateRequirement";
  CHORUS_CHECK(chorus::checkRequirementArgs(fn, nBarriers, outHandle, outReq));
  if (!chorus::validTeam(team))
    return fail(ncclInvalidArgument, "%s: invalid team {nRanks %d, rank %d, stride %d}", fn, team.nRanks, team.rank,
                team.stride);
  std::memset(outReq, 0, sizeof(*outReq));
  outHandle->bufHandle = 0;
  outHandle->nBarriers = nBarriers;
  size_t words = static_cast<size_t>(nBarriers) * (3 + static_cast<size_t>(team.nRanks));
  outReq->bufferSize = words * sizeof(uint32_t);
  outReq->bufferAlign = alignof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclLsaBarrierCreateRequirement)

CHORUS_EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                           ncclGinBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq) try {
  const char* fn = "ncclGinBarrierCreateRequirement";
  CHORUS_CHECK(chorus::checkComm(comm, fn));
  CHORUS_CHECK(chorus::checkRequirementArgs(fn, nBarriers, outHandle, outReq));
  if (!chorus::validTeam(team))
    return fail(ncclInvalidArgument, "%s: invalid team {nRanks %d, rank %d, stride %d}", fn, team.nRanks, team.rank,
                team.stride);
  std::memset(outReq, 0, sizeof(*outReq));
  outHandle->signal0 = 0;
  outHandle->bufHandle = 0;
  outReq->bufferSize = static_cast<size_t>(nBarriers) * chorus::kGinMaxContexts * sizeof(uint32_t);
  outReq->bufferAlign = alignof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  outReq->ginSignalCount = nBarriers;
  outReq->outGinSignalStart = &outHandle->signal0;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGinBarrierCreateRequirement)

CHORUS_EXPORT ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq) try {
  const char* fn = "ncclLLA2ACreateRequirement";
  CHORUS_CHECK(chorus::checkRequirementArgs(fn, nBlocks, outHandle, outReq));
  if (nSlots < 0) return fail(ncclInvalidArgument, "%s: negative slot count %d", fn, nSlots);
  std::memset(outReq, 0, sizeof(*outReq));
  outHandle->bufHandle = 0;
  outHandle->nSlots = static_cast<uint32_t>(nSlots);
  size_t lines = static_cast<size_t>(nBlocks) * (1 + 2 * static_cast<size_t>(nSlots));
  outReq->bufferSize = lines * chorus::kLLLineBytes;
  outReq->bufferAlign = chorus::kLLLineBytes;
  outReq->outBufferHandle = &outHandle->bufHandle;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclLLA2ACreateRequirement)

// An element wider than one slot's payload is split over several slots.
CHORUS_EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  if (maxElts < 0 || maxEltSize < 0) {
    fail(ncclInvalidArgument, "ncclLLA2ACalcSlots: negative argument (maxElts %d, maxEltSize %d)", maxElts, maxEltSize);
    return 0;
  }
  int slotsPerElt =
      static_cast<int>((static_cast<size_t>(maxEltSize) + chorus::kLLPayloadBytes - 1) / chorus::kLLPayloadBytes);
  return maxElts * slotsPerElt;
}
CHORUS_EXPORT_ALIAS(ncclLLA2ACalcSlots)

// NVIDIA exports this one without a pncclX twin.
CHORUS_EXPORT void ncclResetDebugInitInternal(void) { chorus::logReset(); }
