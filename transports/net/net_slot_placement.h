// Where a network link's FIFO slots live, per connection: gathers the
// GPUDirect policy's inputs (the backend device's pointer support, the GPU's
// route to that NIC, the knobs: net_gdr_policy.h), decides, says so at INFO
// for GPU-mode links, and allocates the FIFO accordingly. The control block
// (counters, sizes, fingerprints) always stays in host memory, where the
// proxy thread reads it; only the slots move to device memory.
#pragma once

#include "chorus/net_plugin.h"
#include "transport/transport.h"
#include "transports/net/net_gdr_policy.h"
#include "transports/net/net_link.h"

namespace chorus {

// The placement of this side's slots (`sender`: its send slots; else its
// receive slots), and whether received slots need an iflush.
ncclResult_t netPlaceSlots(const ConnRequest& req, const chorusNet_v1_t* net, int dev, bool sender,
                           NetBufferPlacement* placement, bool* flushAfterRecv);

// Allocates the link's FIFO: host memory for all of it, or host memory for
// the control block and device memory (req.selfDevice) for the slots, with
// the registration type (and dma-buf) set on the link.
ncclResult_t netAllocFifo(NetLink& link, const ConnRequest& req, NetBufferPlacement placement);

// GPU mode: points the executor's end at addresses kernels use (the mapped
// control block; the slots where they live: `deviceSlots`, or mapped with
// the control block when null).
ncclResult_t netMapEndForKernels(const ConnRequest& req, char* deviceSlots, FifoEnd* end);

}  // namespace chorus
