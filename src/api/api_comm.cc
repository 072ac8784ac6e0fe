// Communicator entry points.
#include <cstring>

#include "api/arg_checks.h"
#include "api/export.h"
#include "bootstrap/unique_id.h"
#include "chorus/chorus.h"
#include "core/comm.h"
#include "core/comm_lifecycle.h"
#include "core/comm_query.h"
#include "core/mode.h"
#include "core/result.h"
#include "enqueue/comm_init_all.h"
#include "enqueue/group.h"
#include "gpu/gpu_runtime.h"

using namespace chorus;

namespace {

ncclResult_t checkInitArgs(ncclComm_t* comm, int nranks, int rank, const char* fn) {
  CHORUS_CHECK(checkPtr(comm, fn, "comm (output pointer)"));
  if (nranks < 1) return fail(ncclInvalidArgument, "%s: nranks must be >= 1, got %d", fn, nranks);
  return checkRoot(rank, nranks, fn, "rank");
}

// Entry points that only read a communicator still refuse one whose init
// has not finished: ncclInvalidArgument, as NCCL answers a call on a
// communicator whose previous operation still returns ncclInProgress.
ncclResult_t checkReady(ncclComm_t comm, const char* fn) {
  CHORUS_CHECK(checkComm(comm, fn));
  if (comm->asyncError.load() == ncclInProgress)
    return fail(ncclInvalidArgument, "%s: communicator is still initializing (poll ncclCommGetAsyncError)", fn);
  return ncclSuccess;
}

// Inside ncclGroupStart/End, creations and finalizes wait for ncclGroupEnd.
DeferRendezvous groupDeferral() { return inGroup() ? DeferRendezvous(enqueueInit) : DeferRendezvous(); }

}  // namespace

CHORUS_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) try {
  CHORUS_CHECK(checkPtr(uniqueId, "ncclGetUniqueId", "uniqueId"));
  return createUniqueId(uniqueId);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGetUniqueId)

CHORUS_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                  ncclConfig_t* config) try {
  CHORUS_CHECK(checkInitArgs(comm, nranks, rank, "ncclCommInitRankConfig"));
  return commInitRank(comm, nranks, commId, rank, config, groupDeferral());
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommInitRankConfig)

CHORUS_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) try {
  CHORUS_CHECK(checkInitArgs(comm, nranks, rank, "ncclCommInitRank"));
  return commInitRank(comm, nranks, commId, rank, nullptr, groupDeferral());
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommInitRank)

CHORUS_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                    ncclUniqueId* commIds, ncclConfig_t* config) try {
  CHORUS_CHECK(checkInitArgs(newcomm, nranks, myrank, "ncclCommInitRankScalable"));
  if (nId < 1 || nId > nranks)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId must be in [1, nranks], got %d", nId);
  CHORUS_CHECK(checkPtr(commIds, "ncclCommInitRankScalable", "commIds"));
  // Every rank meets at the first id's store; the other roots are accepted
  // (their stores stay idle) so programs written for several roots work.
  return commInitRank(newcomm, nranks, commIds[0], myrank, config, groupDeferral());
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommInitRankScalable)

CHORUS_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) try {
  CHORUS_CHECK(checkPtr(comm, "ncclCommInitAll", "comm (output array)"));
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: ndev must be >= 1, got %d", ndev);
  if (devlist != nullptr)
    for (int i = 0; i < ndev; ++i)
      if (devlist[i] < 0)
        return fail(ncclInvalidArgument, "ncclCommInitAll: devlist[%d] = %d is invalid", i, devlist[i]);
  if (inGroup()) return fail(ncclInvalidUsage, "ncclCommInitAll: cannot be called inside a group");
  return commInitAll(comm, ndev, devlist);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommInitAll)

CHORUS_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                         ncclConfig_t* config) try {
  CHORUS_CHECK(checkReady(comm, "ncclCommSplit"));
  CHORUS_CHECK(checkPtr(newcomm, "ncclCommSplit", "newcomm"));
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, "ncclCommSplit: color must be >= 0 or NCCL_SPLIT_NOCOLOR, got %d", color);
  return commSplit(comm, color, key, newcomm, config, groupDeferral());
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommSplit)

CHORUS_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                          ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) try {
  CHORUS_CHECK(checkReady(comm, "ncclCommShrink"));
  CHORUS_CHECK(checkPtr(newcomm, "ncclCommShrink", "newcomm"));
  if (excludeRanksCount < 0) return fail(ncclInvalidArgument, "ncclCommShrink: excludeRanksCount is negative");
  if (excludeRanksCount > 0) CHORUS_CHECK(checkPtr(excludeRanksList, "ncclCommShrink", "excludeRanksList"));
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, "ncclCommShrink: unknown shrinkFlags 0x%x", shrinkFlags);
  return commShrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags, groupDeferral());
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommShrink)

CHORUS_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) try {
  CHORUS_CHECK(checkReady(comm, "ncclCommFinalize"));
  return commFinalize(comm, groupDeferral());
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommFinalize)

CHORUS_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) try {
  if (comm == nullptr) return ncclSuccess;  // like free(NULL), as NCCL does
  CHORUS_CHECK(checkComm(comm, "ncclCommDestroy"));
  groupDropComm(comm, "ncclCommDestroy");
  return commDestroy(comm);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommDestroy)

CHORUS_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) try {
  if (comm == nullptr) return ncclSuccess;
  CHORUS_CHECK(checkComm(comm, "ncclCommAbort"));
  groupDropComm(comm, "ncclCommAbort");
  return commAbort(comm);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommAbort)

CHORUS_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) try {
  CHORUS_CHECK(checkComm(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT (0), got %d",
                revokeFlags);
  if (comm->finalized) return fail(ncclInvalidUsage, "ncclCommRevoke: communicator was finalized");
  return commRevoke(comm);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommRevoke)

CHORUS_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) try {
  CHORUS_CHECK(checkComm(comm, "ncclCommGetAsyncError"));
  CHORUS_CHECK(checkPtr(asyncError, "ncclCommGetAsyncError", "asyncError"));
  // What the kernels reported so far (not while init may still be creating
  // the GPU state, nor once abort may be tearing it down).
  if (comm->asyncError.load() != ncclInProgress && !comm->abortFlag.load() && comm->gpu)
    (void)chorus::gpu::commPollError(comm);
  *asyncError = static_cast<ncclResult_t>(comm->asyncError.load());
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommGetAsyncError)

CHORUS_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) try {
  CHORUS_CHECK(checkReady(comm, "ncclCommCount"));
  CHORUS_CHECK(checkPtr(count, "ncclCommCount", "count"));
  *count = comm->id.nranks;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommCount)

CHORUS_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) try {
  CHORUS_CHECK(checkReady(comm, "ncclCommCuDevice"));
  CHORUS_CHECK(checkPtr(device, "ncclCommCuDevice", "device"));
  *device = comm->id.cudaDev;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommCuDevice)

CHORUS_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) try {
  CHORUS_CHECK(checkReady(comm, "ncclCommUserRank"));
  CHORUS_CHECK(checkPtr(rank, "ncclCommUserRank", "rank"));
  *rank = comm->id.rank;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommUserRank)

CHORUS_EXPORT ncclResult_t chorusSetDefaultMode(chorusMode_t mode) try {
  if (mode != chorusModeAuto && mode != chorusModeHost && mode != chorusModeGpu)
    return fail(ncclInvalidArgument, "chorusSetDefaultMode: unknown mode %d", static_cast<int>(mode));
  setDefaultMode(mode);
  return ncclSuccess;
}
CHORUS_API_CATCH

CHORUS_EXPORT ncclResult_t chorusCommGetMode(ncclComm_t comm, chorusMode_t* mode) try {
  CHORUS_CHECK(checkComm(comm, "chorusCommGetMode"));
  CHORUS_CHECK(checkPtr(mode, "chorusCommGetMode", "mode"));
  *mode = comm->id.hostMode ? chorusModeHost : chorusModeGpu;
  return ncclSuccess;
}
CHORUS_API_CATCH
