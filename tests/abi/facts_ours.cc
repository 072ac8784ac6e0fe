// Facts of our public headers as a CUDA-less consumer sees them.
#ifndef CHORUS_NO_CUDA_HEADERS
#define CHORUS_NO_CUDA_HEADERS 1
#endif
#include "nccl.h"
#include "chorus/nccl_device_host.h"

#include <type_traits>

#ifdef CHORUS_HAVE_CUDA_HEADERS
#error "CHORUS_NO_CUDA_HEADERS must keep nccl.h away from the CUDA headers"
#endif

// The device-API host functions have profiling twins that NVIDIA's header
// does not declare, so they are checked here rather than in the shared table.
#define CHORUS_ABI_SAME_TWIN(fn) \
  static_assert(std::is_same_v<decltype(&fn), decltype(&p##fn)>, #fn " and p" #fn " differ")
CHORUS_ABI_SAME_TWIN(ncclDevCommCreate);
CHORUS_ABI_SAME_TWIN(ncclDevCommDestroy);
CHORUS_ABI_SAME_TWIN(ncclTeamWorld);
CHORUS_ABI_SAME_TWIN(ncclTeamLsa);
CHORUS_ABI_SAME_TWIN(ncclTeamRail);
CHORUS_ABI_SAME_TWIN(ncclTeamRankToWorld);
CHORUS_ABI_SAME_TWIN(ncclTeamRankToLsa);
CHORUS_ABI_SAME_TWIN(ncclLsaBarrierCreateRequirement);
CHORUS_ABI_SAME_TWIN(ncclGinBarrierCreateRequirement);
CHORUS_ABI_SAME_TWIN(ncclLLA2ACreateRequirement);
CHORUS_ABI_SAME_TWIN(ncclLLA2ACalcSlots);

#define CHORUS_ABI_FACTS_FN oursFacts
#define CHORUS_ABI_DEVICE 1
#include "abi/abi_facts.inc"
