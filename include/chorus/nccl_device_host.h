/*
 * Chorus — host-side functions of the NCCL 2.28 device API.
 *
 * NCCL 2.28 added a device API (kernels that talk to peers directly through
 * symmetric memory). Its device half lives in NVIDIA's <nccl_device.h>; its
 * host half is a handful of C functions exported by libnccl.so.2. Chorus
 * exports the same functions with the same signatures and argument layouts,
 * so programs linked against NVIDIA's library still resolve every symbol.
 *
 * What works today: the team queries and the requirement/size calculators,
 * which are plain arithmetic. Creating a device communicator
 * (ncclDevCommCreate) is not supported yet and returns ncclInvalidUsage; see
 * docs/api.md.
 *
 * Do not include this header together with NVIDIA's <nccl_device.h>: both
 * define the same structures.
 */
#ifndef CHORUS_NCCL_DEVICE_HOST_H_
#define CHORUS_NCCL_DEVICE_HOST_H_

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A team is an arithmetic progression of world ranks: member i is world rank
 * (worldRank of member `rank`) + (i - rank) * stride, for 0 <= i < nRanks. */
typedef struct ncclTeam {
  int nRanks;
  int rank; /* the calling rank's index in the team */
  int stride;
} ncclTeam_t;

/* Index of a resource inside the device communicator's resource window,
 * filled in by ncclDevCommCreate. */
typedef uint32_t ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* The device communicator. Its contents are only meaningful to device code;
 * Chorus never creates one, so the type stays incomplete here. */
typedef struct ncclDevComm ncclDevComm_t;

typedef struct ncclMultimemHandle {
  void* mcBasePtr;
} ncclMultimemHandle_t;

typedef struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
} ncclLsaBarrierHandle_t;

typedef struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t bufHandle;
} ncclGinBarrierHandle_t;

typedef struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
} ncclLLA2AHandle_t;

/* One resource a device communicator must provide: a buffer in the resource
 * window plus GIN signals/counters. Requirements form a singly linked list;
 * the out* pointers receive the assigned handles at ncclDevCommCreate. */
typedef struct ncclDevResourceRequirements {
  struct ncclDevResourceRequirements* next;
  size_t bufferSize;
  size_t bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
} ncclDevResourceRequirements_t;

/* A team the device communicator must be able to address (optionally with a
 * multicast mapping). */
typedef struct ncclTeamRequirements {
  struct ncclTeamRequirements* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
} ncclTeamRequirements_t;

/* Everything ncclDevCommCreate is asked to set up. */
typedef struct ncclDevCommRequirements {
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount;
  int lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
} ncclDevCommRequirements_t;

/* Device communicators: not supported by Chorus yet (ncclInvalidUsage). */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

/* Teams of a communicator: every rank (stride 1); the ranks sharing this
 * rank's node ("load/store accessible"); and the rail, i.e. one rank per node
 * at this rank's local index (stride = ranks per node). The team functions
 * return an empty team ({0, -1, 0}) for an invalid communicator. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);

/* Maps member `rank` of `team` (a team containing the caller) to its world
 * rank, or to its index in the caller's lsa team. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Requirement builders: fill *outReq with the buffer (and signals) that
 * `nBarriers` barriers over `team`, or `nBlocks` blocks of an LL all-to-all
 * with `nSlots` slots, need; *outHandle receives its handles once
 * ncclDevCommCreate has placed the resource. */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);

/* Slots an LL all-to-all needs per epoch to carry `maxElts` elements of up to
 * `maxEltSize` bytes each (one slot moves 8 payload bytes). */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

/* Re-reads the NCCL_DEBUG* environment variables; the non-deprecated twin of
 * ncclResetDebugInit that NCCL's own tests call. */
void ncclResetDebugInitInternal(void);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_NCCL_DEVICE_HOST_H_ */
