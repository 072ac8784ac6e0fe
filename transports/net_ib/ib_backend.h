// The InfiniBand verbs network backend: one chorusNet_v1_t over RC queue
// pairs and RDMA WRITE WITH IMMEDIATE. libibverbs is opened with dlopen at run
// time; no library or no RDMA device means 0 devices.
#pragma once

#include "chorus/net_plugin.h"

namespace chorus {

const chorusNet_v1_t* netIbBackend();

}  // namespace chorus
