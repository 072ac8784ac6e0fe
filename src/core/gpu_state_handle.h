// The communicator's handle on its GPU-mode resources. The resources belong
// to src/gpu (src/gpu/cuda/comm_state.h); the communicator only owns them, so
// this header declares the handle and nothing else, and core/comm.h stays
// free of executor headers.
#pragma once

#include <memory>

namespace chorus::gpu {

// Opaque here; defined by the GPU runtime (a CUDA build or the no-CUDA stub).
struct CommState;
// Frees a CommState; defined next to it (src/gpu/cuda/, src/gpu/no_cuda/).
struct CommStateDeleter {
  void operator()(CommState* state) const;
};
using CommStatePtr = std::unique_ptr<CommState, CommStateDeleter>;

}  // namespace chorus::gpu
