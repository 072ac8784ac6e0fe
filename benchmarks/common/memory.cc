#include "common/memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/world.h"

namespace chorus_bench {

namespace {
constexpr size_t kAlign = 4096;  // page alignment: no false sharing, friendly to SIMD and DMA

size_t roundUp(size_t bytes) { return bytes ? (bytes + kAlign - 1) / kAlign * kAlign : kAlign; }

void* alignedHost(size_t bytes) { return std::aligned_alloc(kAlign, roundUp(bytes)); }

// A CUDA call behind a view failed: the device is unusable for this run, and
// a view cannot report an error, so the job ends here (device.h printed why).
void viewFailed(ncclResult_t res) {
  if (res == ncclSuccess) return;
  std::fprintf(stderr, "chorus benchmarks: staging copy of a device buffer failed\n");
  worldAbort(3);
}
}  // namespace

ncclResult_t Memory::init(ncclComm_t comm) {
  ncclResult_t res = chorusCommGetMode(comm, &mode_);
  if (res != ncclSuccess) return res;
  stream_ = nullptr;
  if (mode_ == chorusModeHost) return ncclSuccess;
  if (!device::built()) {
    std::fprintf(stderr,
                 "chorus benchmarks: the communicator runs in GPU mode but these tools were built without "
                 "CUDA support; run with CHORUS_MODE=host\n");
    return ncclInvalidUsage;
  }
  res = ncclCommCuDevice(comm, &device_);
  if (res != ncclSuccess) return res;
  if (device_ < 0) {
    std::fprintf(stderr, "chorus benchmarks: a GPU-mode communicator reports no CUDA device\n");
    return ncclInternalError;
  }
  std::snprintf(description_, sizeof description_, "device memory, CUDA device %d", device_);
  res = device::select(device_);
  if (res != ncclSuccess) return res;
  return device::streamCreate(&stream_);
}

Memory::~Memory() {
  if (!onDevice()) return;
  activate();
  retireGraph();
  for (device::Graph g : retired_) device::dropGraph(g);
  freeStaging();
  device::streamDestroy(stream_);
}

const char* Memory::describe() const { return description_; }

ncclResult_t Memory::activate() { return onDevice() ? device::select(device_) : ncclSuccess; }

ncclResult_t Memory::alloc(size_t bytes, void** out) {
  if (onDevice()) {
    ncclResult_t res = activate();
    if (res == ncclSuccess) res = device::alloc(out, roundUp(bytes), stream_);
    if (res == ncclSuccess) res = growStaging(bytes);
    return res;
  }
  // Never ask for 0 bytes, so that zero-size rows still get distinct, valid pointers.
  void* p = alignedHost(bytes);
  if (!p) {
    std::fprintf(stderr, "chorus benchmarks: cannot allocate %zu bytes of host memory\n", bytes);
    return ncclSystemError;
  }
  // Touch every page now so first-use page faults do not land in the timing.
  std::memset(p, 0, roundUp(bytes));
  *out = p;
  return ncclSuccess;
}

void Memory::release(void* buf) {
  if (!onDevice()) {
    std::free(buf);
    return;
  }
  activate();
  device::release(buf);
}

ncclResult_t Memory::growStaging(size_t bytes) {
  if (bytes <= stagingBytes_) return ncclSuccess;
  freeStaging();
  const size_t rounded = roundUp(bytes);
  // Pinned memory makes the staging copies several times faster; plain
  // memory works too when the driver will not pin that much.
  stagingPinned_ = device::allocHost(&staging_, rounded) == ncclSuccess;
  if (!stagingPinned_) staging_ = alignedHost(rounded);
  if (!staging_) {
    std::fprintf(stderr, "chorus benchmarks: cannot allocate %zu bytes of host staging memory\n", rounded);
    return ncclSystemError;
  }
  stagingBytes_ = rounded;
  return ncclSuccess;
}

void Memory::freeStaging() {
  if (stagingPinned_)
    device::releaseHost(staging_);
  else
    std::free(staging_);
  staging_ = nullptr;
  stagingBytes_ = 0;
  stagingPinned_ = false;
}

void* Memory::beginView(void* buf, size_t bytes, bool load) {
  if (!onDevice()) return buf;
  void* view = nullptr;
  if (!stagingBusy_ && stagingFits(bytes)) {
    view = staging_;
    stagingBusy_ = true;
  } else {
    view = alignedHost(bytes);
    if (!view) viewFailed(ncclSystemError);
  }
  if (load && bytes > 0) {
    viewFailed(activate());
    viewFailed(device::toHost(view, buf, bytes, stream_));
  }
  return view;
}

void Memory::endView(void* buf, void* view, size_t bytes, bool store) {
  if (!onDevice()) return;
  if (store && bytes > 0) {
    viewFailed(activate());
    viewFailed(device::toDevice(buf, view, bytes, stream_));
  }
  if (view == staging_)
    stagingBusy_ = false;
  else
    std::free(view);
}

ncclResult_t Memory::sync() {
  if (!onDevice()) return ncclSuccess;
  const ncclResult_t res = activate();
  return res == ncclSuccess ? device::streamSync(stream_) : res;
}

ncclResult_t Memory::beginCapture() {
  if (!onDevice()) return ncclInvalidUsage;
  const ncclResult_t res = activate();
  return res == ncclSuccess ? device::beginCapture(stream_) : res;
}

ncclResult_t Memory::endCapture() {
  if (!onDevice()) return ncclInvalidUsage;
  retireGraph();
  const ncclResult_t res = activate();
  return res == ncclSuccess ? device::endCapture(stream_, &graph_) : res;
}

ncclResult_t Memory::launchGraph() {
  if (!onDevice() || !graph_) return ncclInvalidUsage;
  const ncclResult_t res = activate();
  return res == ncclSuccess ? device::launchGraph(graph_, stream_) : res;
}

void Memory::retireGraph() {
  if (graph_) retired_.push_back(graph_);
  graph_ = nullptr;
}

int deviceForLocalRank(int localIndex) {
  if (!device::built()) return -1;
  // Explicit host mode: leave CUDA alone (no context on any device).
  const char* mode = std::getenv("CHORUS_MODE");
  if (mode && std::strcmp(mode, "host") == 0) return -1;
  const int n = device::count();
  if (n <= 0) return -1;
  return localIndex % n;
}

}  // namespace chorus_bench
