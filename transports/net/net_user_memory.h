// Sends from and receives into the application's memory: calls a built-in
// backend offers beyond the chorusNet_v1_t table, with which a network link
// moves a piece straight between the wire and a user buffer instead of
// through its FIFO slot (FifoEnd::sendsUserMemory, FifoEnd::landings).
// Plugins' tables have no such calls; their links always use the slots.
#pragma once

#include <cstddef>

#include "nccl.h"

namespace chorus {

// One message made of `head` followed by `data`.
using NetGatherSendFn = ncclResult_t (*)(void* comm, const void* head, size_t headBytes, const void* data, size_t bytes,
                                         int tag, void** request);

// Where the payload of a message of `messageBytes` goes past its first
// `prefixBytes`, which land in the receive's own buffer (`prefix`): asked
// once, when the prefix has been read and the rest is about to be; null
// keeps the whole message in the receive's buffer.
using NetLandFn = char* (*)(void* arg, const char* prefix, size_t messageBytes);
// A receive of up to `size` bytes into `data` whose payload past
// `prefixBytes` may land elsewhere, as `land` decides.
using NetLandingRecvFn = ncclResult_t (*)(void* comm, void* data, size_t size, int tag, size_t prefixBytes,
                                          NetLandFn land, void* landArg, void** request);

// The gathering send for `sendComm`, a send connection of `backendTable`, or
// null where that backend or this connection has none (the socket backend's
// connections with data streams: NCCL_SOCKET_NTHREADS > 0).
NetGatherSendFn netGatherSendFor(const void* backendTable, void* sendComm);
// The landing receive of `backendTable`'s receive connections, or null. A
// message the peer split over data streams always stays in the receive's
// buffer (land is not asked).
NetLandingRecvFn netLandingRecvFor(const void* backendTable);

}  // namespace chorus
