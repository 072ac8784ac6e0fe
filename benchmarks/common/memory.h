// Where benchmark buffers live. This is the one place that knows: host mode
// uses page-aligned host memory and a NULL stream; GPU mode uses device
// memory on the communicator's device, one non-blocking stream per rank, and
// a staging copy in host memory for the views the results check reads and
// writes. The driver and the collective descriptions never touch CUDA.
#pragma once

#include <cstddef>
#include <vector>

#include "chorus/chorus.h"
#include "common/device.h"

namespace chorus_bench {

class Memory {
 public:
  // Picks the kind of memory `comm` needs (chorusCommGetMode). GPU mode
  // needs a CUDA build; otherwise this fails with a message.
  ncclResult_t init(ncclComm_t comm);
  ~Memory();

  chorusMode_t mode() const { return mode_; }
  bool onDevice() const { return mode_ == chorusModeGpu; }
  cudaStream_t stream() const { return stream_; }
  const char* describe() const;

  // Makes the communicator's device current in the calling thread (GPU mode;
  // nothing in host mode). Every other GPU-mode call here does it itself.
  ncclResult_t activate();

  // Buffers the collectives run on. Contents are unspecified after alloc.
  // In GPU mode, alloc also sizes the staging area for views of the buffer,
  // so that no allocation happens once collectives are running.
  ncclResult_t alloc(size_t bytes, void** out);
  void release(void* buf);

  // Host-readable/writable view of `bytes` at `buf`. For host memory that is
  // the buffer itself; device memory stages through a host copy, filled from
  // the device when `load`, and written back by endView when `store`.
  // Views must not overlap in time (one open view per Memory); a view that
  // does gets a temporary staging buffer of its own.
  void* beginView(void* buf, size_t bytes, bool load);
  void endView(void* buf, void* view, size_t bytes, bool store);

  // Waits for everything launched on stream() (nothing to wait for on host).
  ncclResult_t sync();

  // CUDA graphs (GPU mode): capture what the thread launches on stream()
  // between beginCapture and endCapture, then replay it with launchGraph.
  // retireGraph sets the graph aside; it is destroyed with the Memory, when
  // no peer can be waiting (destroying a graph may wait for the device).
  ncclResult_t beginCapture();
  ncclResult_t endCapture();
  ncclResult_t launchGraph();
  void retireGraph();

 private:
  bool stagingFits(size_t bytes) const { return staging_ != nullptr && bytes <= stagingBytes_; }
  ncclResult_t growStaging(size_t bytes);
  void freeStaging();

  chorusMode_t mode_ = chorusModeHost;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  void* staging_ = nullptr;  // host copy behind views of device memory
  size_t stagingBytes_ = 0;
  bool stagingPinned_ = false;
  bool stagingBusy_ = false;
  device::Graph graph_ = nullptr;
  std::vector<device::Graph> retired_;
  char description_[48] = "host memory";
};

// GPU mode: the device the rank with local index `localIndex` (its position
// among this machine's ranks) uses, as nccl-tests assigns them: round-robin
// over the visible devices. -1 when the rank should not select a device: a
// build without CUDA, no visible device, or CHORUS_MODE=host.
int deviceForLocalRank(int localIndex);

}  // namespace chorus_bench
