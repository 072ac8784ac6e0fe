// The UCX network backend: one chorusNet_v1_t over UCP's tag API. Compiled
// only when the UCX headers were found (CHORUS_HAVE_UCX); libucp is opened
// with dlopen at run time, so a missing library means 0 devices.
#pragma once

#include "chorus/net_plugin.h"

namespace chorus {

const chorusNet_v1_t* netUcxBackend();

}  // namespace chorus
