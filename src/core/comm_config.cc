#include "core/comm_config.h"

#include <algorithm>

#include "core/params.h"
#include "core/result.h"
#include "core/wait_limit.h"

namespace chorus {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

ncclResult_t checkHeader(const ncclConfig_t* user) {
  if (user->magic != kConfigMagic)
    return fail(ncclInvalidArgument,
                "config: magic 0x%x is wrong; initialize ncclConfig_t with NCCL_CONFIG_INITIALIZER", user->magic);
  if (user->size < offsetof(ncclConfig_t, maxCTAs) + sizeof(int) || user->size > sizeof(ncclConfig_t) * 4)
    return fail(ncclInvalidArgument, "config: size %zu is not a ncclConfig_t size", user->size);
  return ncclSuccess;
}

// Reads a field only when the caller's (possibly older, smaller) struct has it.
template <typename T>
bool has(const ncclConfig_t* user, const T* field) {
  return reinterpret_cast<const char*>(field) + sizeof(T) <= reinterpret_cast<const char*>(user) + user->size;
}

// An int field the caller's struct holds and set (not NCCL_CONFIG_UNDEF_INT).
bool setInt(const ncclConfig_t* user, const int* field) { return has(user, field) && *field != NCCL_CONFIG_UNDEF_INT; }

// Fields that only steer GPU kernels or NCCL features Chorus does not have:
// not used, but refused where NCCL refuses them, so a program that works
// with one library works with the other.
ncclResult_t checkUnusedFields(const ncclConfig_t* user) {
  auto flag = [&](const int* f, const char* name) -> ncclResult_t {
    if (setInt(user, f) && *f != 0 && *f != 1)
      return fail(ncclInvalidArgument, "config: %s must be 0 or 1, got %d", name, *f);
    return ncclSuccess;
  };
  if (setInt(user, &user->cgaClusterSize) && user->cgaClusterSize < 0)
    return fail(ncclInvalidArgument, "config: cgaClusterSize must be >= 0, got %d", user->cgaClusterSize);
  CHORUS_CHECK(flag(&user->splitShare, "splitShare"));
  CHORUS_CHECK(flag(&user->collnetEnable, "collnetEnable"));
  CHORUS_CHECK(flag(&user->shrinkShare, "shrinkShare"));
  CHORUS_CHECK(flag(&user->nvlinkCentricSched, "nvlinkCentricSched"));
  constexpr int kPolicies = NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO;
  if (setInt(user, &user->CTAPolicy) && (user->CTAPolicy & ~kPolicies) != 0)
    return fail(ncclInvalidArgument, "config: CTAPolicy %d is not a combination of NCCL_CTA_POLICY_* flags",
                user->CTAPolicy);
  if (setInt(user, &user->nvlsCTAs) && user->nvlsCTAs <= 0)
    return fail(ncclInvalidArgument, "config: nvlsCTAs must be >= 1, got %d", user->nvlsCTAs);
  constexpr int kMaxChannelsPerNetPeer = 64;
  if (setInt(user, &user->nChannelsPerNetPeer) &&
      (user->nChannelsPerNetPeer <= 0 || user->nChannelsPerNetPeer > kMaxChannelsPerNetPeer))
    return fail(ncclInvalidArgument, "config: nChannelsPerNetPeer must be in [1, %d], got %d", kMaxChannelsPerNetPeer,
                user->nChannelsPerNetPeer);
  return ncclSuccess;
}

// CHORUS_WIRE and its companions (docs/wire.md). An unknown format is
// refused at init rather than silently not compressing.
ncclResult_t wireFromEnv(CommConfig* c) {
  const std::string w = params::wire();
  if (w.empty() || w == "native")
    c->wire = 0;
  else if (w == "bf16")
    c->wire = 1;
  else if (w == "fp8")
    c->wire = 2;
  else if (w == "int8")
    c->wire = 3;
  else
    return fail(ncclInvalidArgument, "CHORUS_WIRE=%s: expected bf16, fp8, int8 or native", w.c_str());
  c->wireMinBytes = static_cast<uint64_t>(std::max<int64_t>(params::wireMinBytes(), 0));
  c->wireFeedback = params::wireFeedback() != 0;
  c->wireHosts = params::wireHosts() != 0;
  c->deterministic = params::deterministic() != 0;
  return ncclSuccess;
}

uint32_t clampSlotBytes(int64_t bytes) {
  return static_cast<uint32_t>(std::clamp<int64_t>(bytes, 4096, 16 << 20)) & ~63u;
}

// CHORUS_SLOT_BYTES, else NCCL_BUFFSIZE over the slots, else the placement's
// rule at init (slotBytesForPlacement). Needs c->nslots.
ncclResult_t slotBytesFromEnv(CommConfig* c) {
  const int64_t slot = params::slotBytes(), fifo = params::buffSize();
  if (slot < 0) return fail(ncclInvalidArgument, "CHORUS_SLOT_BYTES=%lld: expected a byte count", (long long)slot);
  if (fifo < 0) return fail(ncclInvalidArgument, "NCCL_BUFFSIZE=%lld: expected a byte count", (long long)fifo);
  c->slotBytesAuto = slot == 0 && fifo == 0;
  const int64_t chosen = slot > 0 ? slot : fifo > 0 ? fifo / c->nslots : kBaseSlotBytes;
  c->slotBytes = c->collSlotBytes = clampSlotBytes(chosen);
  return ncclSuccess;
}

}  // namespace

int64_t stallWarnMsFromSeconds(int64_t seconds) {
  if (seconds <= 0) return 0;
  return std::min<int64_t>(seconds, 86400) * 1000;
}

ncclResult_t resolveCommConfig(const ncclConfig_t* user, const CommConfig* inherit, CommConfig* out) {
  CommConfig c = inherit ? *inherit : CommConfig{};
  if (!inherit) {
    c.llSlotBytes = static_cast<uint32_t>(std::clamp<int64_t>(params::llSlotBytes(), 512, 1 << 20)) & ~63u;
    c.nslots = static_cast<uint32_t>(std::clamp<int64_t>(params::slotCount(), 2, 64));
    CHORUS_CHECK(slotBytesFromEnv(&c));
    c.timeoutMs = normalizeWaitLimitMs(params::timeoutMs());
    c.initTimeoutMs = normalizeWaitLimitMs(params::initTimeoutMs());
    c.stallWarnMs = stallWarnMsFromSeconds(params::stallWarnS());
    const int64_t spins = params::spinCount();
    c.spinCountAuto = spins < 0;
    c.spinCount = spins < 0 ? kDefaultSpinCount : spins;
    c.localRegister = params::localRegister() != 0;
    c.algo = params::algo();
    c.proto = params::proto();
    CHORUS_CHECK(wireFromEnv(&c));
    c.minChannels = static_cast<int>(std::clamp<int64_t>(params::minChannels(), 1, 32));
    int64_t maxCh = params::maxChannels();
    c.maxChannels = maxCh > 0 ? static_cast<int>(std::min<int64_t>(maxCh, 32)) : 2;
    // NCCL_MIN_CTAS / NCCL_MAX_CTAS bound the same count (a channel is a CTA on GPUs).
    if (params::minCtas() > 0)
      c.minChannels = std::max(c.minChannels, static_cast<int>(std::min<int64_t>(params::minCtas(), 32)));
    if (params::maxCtas() > 0) {
      const int ctas = static_cast<int>(std::min<int64_t>(params::maxCtas(), 32));
      c.maxChannels = maxCh > 0 ? std::min(c.maxChannels, ctas) : ctas;
    }
    if (c.minChannels > c.maxChannels) c.maxChannels = c.minChannels;
    c.maxChannelsChosen = maxCh > 0 || params::maxCtas() > 0;
  }
  if (user == nullptr) {
    *out = c;
    return ncclSuccess;
  }
  CHORUS_CHECK(checkHeader(user));
  CHORUS_CHECK(checkUnusedFields(user));
  if (user->minCTAs != NCCL_CONFIG_UNDEF_INT && user->maxCTAs != NCCL_CONFIG_UNDEF_INT && user->minCTAs > user->maxCTAs)
    return fail(ncclInvalidArgument, "config: minCTAs (%d) must not exceed maxCTAs (%d)", user->minCTAs, user->maxCTAs);
  if (user->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (user->blocking != 0 && user->blocking != 1)
      return fail(ncclInvalidArgument, "config: blocking must be 0 or 1, got %d", user->blocking);
    c.blocking = user->blocking;
  }
  if (user->minCTAs != NCCL_CONFIG_UNDEF_INT) {
    if (user->minCTAs < 1) return fail(ncclInvalidArgument, "config: minCTAs must be >= 1, got %d", user->minCTAs);
    c.minChannels = std::min(user->minCTAs, 32);
  }
  if (user->maxCTAs != NCCL_CONFIG_UNDEF_INT) {
    if (user->maxCTAs < 1) return fail(ncclInvalidArgument, "config: maxCTAs must be >= 1, got %d", user->maxCTAs);
    c.maxChannels = std::min(user->maxCTAs, 32);
    c.maxChannelsChosen = true;
  }
  if (c.minChannels > c.maxChannels) c.maxChannels = c.minChannels;
  if (has(user, &user->commName) && user->commName != nullptr) c.commName = user->commName;
  if (has(user, &user->netName) && user->netName != nullptr) c.netName = user->netName;
  if (has(user, &user->splitShare) && user->splitShare != NCCL_CONFIG_UNDEF_INT) c.splitShare = user->splitShare;
  *out = c;
  return ncclSuccess;
}

}  // namespace chorus
