#include "core/mode.h"

#include <atomic>
#include <string>

#include "core/params.h"
#include "core/result.h"

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
  if (m == chorusModeGpu)
    return fail(ncclInvalidUsage,
                "GPU mode was requested (CHORUS_MODE=gpu or chorusSetDefaultMode) but this build of Chorus has no "
                "GPU executor; use host mode");
  // Auto: the GPU executor is not part of this build, so host mode it is.
  *mode = chorusModeHost;
  return ncclSuccess;
}

}  // namespace chorus
