// Zero-copy ("direct") sends through a connector FIFO, shared by the host
// executor (src/host/step_exec.cc) and the lane kernel
// (kernels/colls/lane_kernel.cuh).
//
// Instead of the data, the sender posts one slot holding a DirectDescriptor,
// with kDirectSlotMarker as its size. The receiver copies the bytes straight
// from the sender's buffer into its output, in chunks of kDirectChunkBytes
// after each of which it updates `copied` (so the waiting sender sees
// progress and its no-progress timeout does not fire during a long copy), and
// frees the slot; only then does the sender's step finish, because the caller
// may reuse its buffer once the operation completes. A send of a registered
// buffer therefore waits for its receiver, as NCCL allows any send to: calls
// that must progress together belong in one group.
//
// A sender does this only for a whole plain send step whose buffer is
// registered with the communicator, and only when its connector says the
// receiver can read the sender's memory by address
// (FifoEnd::peerReadsOurBuffers in src/transport/fifo.h: ranks of one process
// in host mode, ranks of one GPU in one process in GPU mode). Real piece sizes
// never reach the marker: a slot is far smaller than 4 GiB.
#pragma once

#include <cstdint>

namespace chorus {

inline constexpr uint32_t kDirectSlotMarker = 0xFFFFFFFFu;

struct DirectDescriptor {
  uint64_t address;  // of the sender's data, in an address space both ends share
  uint64_t bytes;    // the whole step
  uint64_t copied;   // written by the receiver: bytes copied so far (0 when posted)
};

inline constexpr uint64_t kDirectChunkBytes = uint64_t(8) << 20;

}  // namespace chorus
