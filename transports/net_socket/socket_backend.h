// The TCP socket network backend: one chorusNet_v1_t whose devices are the
// interfaces NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY allow. Always available;
// the fallback when no RDMA device exists. docs/net.md describes it.
#pragma once

#include "chorus/net_plugin.h"

namespace chorus {

const chorusNet_v1_t* netSocketBackend();
// What the proxy may wait on for a socket connection (transports/net/net_wake.h).
bool netSocketPollFd(void* comm, int* fd, short* events);

}  // namespace chorus
