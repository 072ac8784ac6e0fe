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

// Where one side's slots go, and how they are registered and read.
struct NetSlotPlan {
  NetBufferPlacement placement = NetBufferPlacement::HostStaged;
  bool flushAfterRecv = false;  // receive side: received slots need an iflush
  bool regMrFallback = false;   // dma-buf placement: regMr (CUDA) stands in when the dma-buf fails
};

// The plan for this side's slots (`sender`: its send slots; else its
// receive slots).
ncclResult_t netPlaceSlots(const ConnRequest& req, const chorusNet_v1_t* net, int dev, bool sender, NetSlotPlan* plan);

// Allocates the link's FIFO: host memory for all of it, or host memory for
// the control block and device memory (req.selfDevice) for the slots, with
// the registration type (and dma-buf) and the plan's flags set on the link.
// A dma-buf that cannot be exported fails the link, unless the plan allows
// regMr instead (a WARN says so).
ncclResult_t netAllocFifo(NetLink& link, const ConnRequest& req, const NetSlotPlan& plan);

// GPU mode: points the executor's end at addresses kernels use (the mapped
// control block; the slots where they live: `deviceSlots`, or mapped with
// the control block when null). `fifo` is the link's FIFO memory: the
// mapping keeps it, while the end's own handle (whose release retires the
// link) goes with the end.
ncclResult_t netMapEndForKernels(const ConnRequest& req, char* deviceSlots, std::shared_ptr<void> fifo, FifoEnd* end);

}  // namespace chorus
