#include "core/mode.h"

#include <atomic>
#include <string>

#include "core/comm.h"
#include "core/log.h"
#include "core/params.h"
#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus {
namespace {
// The one piece of process-wide mode state.
std::atomic<int> gDefaultMode{chorusModeAuto};
}  // namespace

void setDefaultMode(chorusMode_t mode) { gDefaultMode.store(mode); }

ncclResult_t resolveMode(chorusMode_t* mode) {
  chorusMode_t m = static_cast<chorusMode_t>(gDefaultMode.load());
  if (m == chorusModeAuto) {
    std::string env = params::mode();
    if (env == "host") m = chorusModeHost;
    else if (env == "gpu") m = chorusModeGpu;
    else if (env != "auto" && !env.empty())
      return fail(ncclInvalidArgument, "CHORUS_MODE=%s: expected auto, host or gpu", env.c_str());
  }
  std::string why;
  if (m == chorusModeGpu) {
    if (!gpu::usable(&why))
      return fail(ncclInvalidUsage,
                  "GPU mode was requested (CHORUS_MODE=gpu or chorusSetDefaultMode) but %s; use host mode",
                  why.c_str());
    *mode = chorusModeGpu;
    return ncclSuccess;
  }
  if (m == chorusModeHost) {
    *mode = chorusModeHost;
    return ncclSuccess;
  }
  // Auto: GPU mode when this process can use a GPU, host mode otherwise.
  if (gpu::usable(&why)) {
    *mode = chorusModeGpu;
    return ncclSuccess;
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) CHORUS_INFO(kLogInit, "host mode: %s", why.c_str());
  *mode = chorusModeHost;
  return ncclSuccess;
}

ncclResult_t chooseMode(const ncclComm* parent, ModeChoice* out) {
  ModeChoice c;
  if (parent != nullptr) {
    c.hostMode = parent->id.hostMode;
    c.device = parent->id.cudaDev;
  } else {
    chorusMode_t mode = chorusModeHost;
    CHORUS_CHECK(resolveMode(&mode));
    c.hostMode = mode == chorusModeHost;
    if (!c.hostMode) CHORUS_CHECK(gpu::currentDevice(&c.device));
  }
  *out = c;
  return ncclSuccess;
}

}  // namespace chorus
