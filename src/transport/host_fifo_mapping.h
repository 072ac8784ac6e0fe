// GPU-mode ranks that cannot use P2P (NCCL_P2P_DISABLE, no peer access, other
// hosts) still run their connectors from CUDA kernels, so a FIFO in host
// memory (shm segment, inproc heap, network FIFO) must be pinned and mapped
// for the device, and the FifoEnd handed to the executor must carry the
// device addresses. The host side (a network proxy) keeps its host pointers.
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.h"

namespace chorus {

// Pins and maps `bytes` at `hostBase` (gpu::mapHostMemory). On success
// *memory owns `owner` and the mapping (the mapping is released first, while
// the host memory still exists) and points where `owner` points, and
// *deviceBase is the address kernels use for `hostBase`.
ncclResult_t mapHostFifo(void* hostBase, size_t bytes, std::shared_ptr<void> owner, const ConnRequest& req,
                         const char* transport, std::shared_ptr<void>* memory, char** deviceBase);

// Points end->ctl / end->slots at a FIFO that starts at `base`.
void pointFifoAt(FifoEnd* end, char* base);

}  // namespace chorus
