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

// The one answer to "map this host FIFO memory for kernels", shared by the
// inproc, shm and net transports. When req.deviceMemory (the connection is
// run by GPU kernels) it pins and maps the `bytes` at `hostBase`
// (gpu::mapHostMemory): *memory then owns what it owned before, released
// with it, and the mapping, released once no kernel runs on the device
// together with the host memory it covers: `hostMemory`, or when that is
// null what *memory owned (a handle whose release does more than free, such
// as a network end's, passes its memory here so it is not held back too).
// *deviceBase is the address kernels use for `hostBase`. Host-mode
// connections: nothing is mapped and *deviceBase is null.
ncclResult_t mapFifoForKernels(const ConnRequest& req, const char* transport, void* hostBase, size_t bytes,
                               std::shared_ptr<void>* memory, char** deviceBase,
                               std::shared_ptr<void> hostMemory = nullptr);

// The same for a FIFO end fresh from the transport (host addresses): maps
// the FIFO at end->ctl, keeps the mapping in end->memory and points the end
// at the device addresses. Host-mode connections: the end is left as it is.
ncclResult_t mapFifoEndForKernels(const ConnRequest& req, const char* transport, FifoEnd* end,
                                  std::shared_ptr<void> hostMemory = nullptr);

// Points end->ctl / end->slots at a FIFO that starts at `base`.
void pointFifoAt(FifoEnd* end, char* base);

}  // namespace chorus
