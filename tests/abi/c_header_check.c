/* Our public headers compiled as C (C11, no CUDA headers). Besides proving
 * that they compile, this TU reports the layout C sees, which the test compares
 * with the C++ view of the same headers: a struct must not change shape
 * between the two languages. */
#define CHORUS_NO_CUDA_HEADERS 1
#include "nccl.h"
#include "chorus/chorus.h"
#include "chorus/nccl_device_host.h"

#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#ifdef CHORUS_HAVE_CUDA_HEADERS
#error "CHORUS_NO_CUDA_HEADERS must keep nccl.h away from the CUDA headers"
#endif

static char factText[16384];

static void addFact(const char* key, long long value) {
  size_t used = strlen(factText);
  snprintf(factText + used, sizeof(factText) - used, "%s=%lld\n", key, value);
}

static void addFloatFact(const char* key, double value) {
  size_t used = strlen(factText);
  snprintf(factText + used, sizeof(factText) - used, "%s=%a\n", key, value);
}

/* Keys are spelled exactly as abi_facts.inc spells them. */
#define C_TYPE(T)                                  \
  addFact("sizeof " #T, (long long)sizeof(T));    \
  addFact("alignof " #T, (long long)alignof(T))
#define C_FIELD(S, f)                                                  \
  addFact("offsetof " #S "." #f, (long long)offsetof(S, f));          \
  addFact("sizeof " #S "." #f, (long long)sizeof(((S*)0)->f))
#define C_ENUM(e) addFact("enum " #e, (long long)(e))
#define C_INIT(var, f) addFact("initializer " #var "." #f, (long long)(var).f)

static void layoutFacts(void) {
  C_TYPE(ncclUniqueId);
  C_TYPE(ncclConfig_t);
  C_TYPE(ncclSimInfo_t);
  C_TYPE(ncclResult_t);
  C_TYPE(ncclRedOp_t);
  C_TYPE(ncclDataType_t);
  C_TYPE(ncclScalarResidence_t);
  C_TYPE(ncclTeam_t);
  C_TYPE(ncclDevResourceRequirements_t);
  C_TYPE(ncclTeamRequirements_t);
  C_TYPE(ncclDevCommRequirements_t);
  C_TYPE(ncclLsaBarrierHandle_t);
  C_TYPE(ncclGinBarrierHandle_t);
  C_TYPE(ncclLLA2AHandle_t);
  C_FIELD(ncclConfig_t, blocking);
  C_FIELD(ncclConfig_t, netName);
  C_FIELD(ncclConfig_t, commName);
  C_FIELD(ncclConfig_t, nvlinkCentricSched);
  C_FIELD(ncclSimInfo_t, estimatedTime);
  C_FIELD(ncclTeamRequirements_t, multimem);
  C_FIELD(ncclTeamRequirements_t, outMultimemHandle);
  C_FIELD(ncclDevCommRequirements_t, lsaMultimem);
  C_FIELD(ncclDevCommRequirements_t, ginForceEnable);
  C_FIELD(ncclDevCommRequirements_t, ginCounterCount);
}

static void valueFacts(void) {
  C_ENUM(ncclInProgress);
  C_ENUM(ncclMaxRedOp);
  C_ENUM(ncclFloat8e5m2);
  C_ENUM(ncclNumTypes);
  C_ENUM(ncclScalarHostImmediate);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  C_INIT(config, size);
  C_INIT(config, magic);
  C_INIT(config, version);
  C_INIT(config, blocking);
  C_INIT(config, nvlinkCentricSched);
  ncclSimInfo_t simInfo = NCCL_SIM_INFO_INITIALIZER;
  C_INIT(simInfo, size);
  C_INIT(simInfo, magic);
  C_INIT(simInfo, version);
  addFloatFact("initializer simInfo.estimatedTime", simInfo.estimatedTime);
}

const char* chorus_abi_c_facts(void) {
  factText[0] = '\0';
  layoutFacts();
  valueFacts();
  return factText;
}
