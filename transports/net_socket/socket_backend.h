// The TCP socket network backend: one chorusNet_v1_t whose devices are the
// interfaces NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY allow. Always available;
// the fallback when no RDMA device exists. docs/net.md describes it.
#pragma once

#include "chorus/net_plugin.h"
#include "transports/net/net_user_memory.h"

namespace chorus {

const chorusNet_v1_t* netSocketBackend();
// A send on connection `comm` of `head` followed by `data`, one message
// (transports/net/net_user_memory.h); possible where netSocketGathers(comm).
ncclResult_t netSocketIsendGather(void* comm, const void* head, size_t headBytes, const void* data, size_t size,
                                  int tag, void** request);
bool netSocketGathers(void* comm);
// A receive on connection `comm` whose payload past `prefixBytes` may land
// where `land` says (net_user_memory.h).
ncclResult_t netSocketIrecvLanding(void* comm, void* data, size_t size, int tag, size_t prefixBytes, NetLandFn land,
                                   void* landArg, void** request);
// What the proxy may wait on for a socket connection (transports/net/net_wake.h).
bool netSocketPollFd(void* comm, int* fd, short* events);

}  // namespace chorus
