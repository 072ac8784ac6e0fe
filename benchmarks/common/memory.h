// Where benchmark buffers live. This is the one place that knows: host mode
// uses page-aligned host memory and a NULL stream; GPU mode (device memory,
// a stream per rank, staging copies for the check) is to be added here
// without touching the driver or the collective descriptions.
#pragma once

#include <cstddef>

#include "chorus/chorus.h"

namespace chorus_bench {

class Memory {
 public:
  // Picks the kind of memory `comm` needs (chorusCommGetMode).
  ncclResult_t init(ncclComm_t comm);
  ~Memory();

  chorusMode_t mode() const { return mode_; }
  cudaStream_t stream() const { return stream_; }
  const char* describe() const;

  // Buffers the collectives run on. Contents are unspecified after alloc.
  ncclResult_t alloc(size_t bytes, void** out);
  void release(void* buf);

  // Host-readable/writable view of `bytes` at `buf`. For host memory that is
  // the buffer itself; device memory would stage through a host copy, filled
  // from the device when `load`, and written back by endView when `store`.
  void* beginView(void* buf, size_t bytes, bool load);
  void endView(void* buf, void* view, size_t bytes, bool store);

  // Waits for everything launched on stream() (nothing to wait for on host).
  ncclResult_t sync();

 private:
  chorusMode_t mode_ = chorusModeHost;
  cudaStream_t stream_ = nullptr;
};

}  // namespace chorus_bench
