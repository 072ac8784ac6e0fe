// The cuda variant of the NCCL-ABI test plugin: CUDA regions. Compiled only
// into libnccl-net-cuda.so (TESTNET_CUDA), the one variant that links cudart.
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "tests/transports_plugin/nccl_test_net.h"

namespace testnet {
// Device bytes cross the socket through a host bounce buffer: isend copies
// them out first; a receive's bytes are copied in only when a later flush
// completes (Unflushed), so a caller that reads a slot without flushing, or
// before its flush tested done, reads stale bytes and the collective's
// result is wrong, not just a count at closeRecv. The
// copies use a non-blocking stream of the plugin's own per device, never the
// legacy default stream, which would wait for other streams' spinning kernels.
namespace {
std::mutex gStreamsMu;
std::map<int, cudaStream_t> gStreams;

void cudaWarn(const char* what, cudaError_t e) {
  if (gLog)
    gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "nccl-test-net: %s failed: %s", what, cudaGetErrorString(e));
}
}  // namespace

// The device that owns `p`, or -1 when it is not device memory.
int cudaDeviceOf(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

// A synchronous copy between host memory and memory of device `dev`; the
// calling thread's current device is left as it was.
bool cudaCopy(int dev, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  int prev = -1;
  cudaError_t e = cudaGetDevice(&prev);
  if (e == cudaSuccess && prev != dev) e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    cudaWarn("cudaSetDevice", e);
    return false;
  }
  cudaStream_t stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(gStreamsMu);
    auto it = gStreams.find(dev);
    if (it != gStreams.end()) {
      stream = it->second;
    } else {
      e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      if (e == cudaSuccess) gStreams[dev] = stream;
    }
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, kind, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) cudaWarn("a bounce-buffer copy", e);
  if (prev != dev) cudaSetDevice(prev);
  return e == cudaSuccess;
}

// Every region named must be a CUDA region of this receive comm. The request
// is done on its second test, so a caller that does not wait is caught by the
// flush count checked at closeRecv.
ncclResult_t cudaIflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  auto* c = static_cast<Comm*>(comm);
  *request = nullptr;
  if (c->sender || n != 1) {  // maxRecvs is 1
    TESTNET_WARN("iflush of %d region(s) on a %s comm", n, c->sender ? "send" : "receive");
    return ncclInvalidArgument;
  }
  for (int i = 0; i < n; ++i) {
    const size_t size = sizes[i] > 0 ? static_cast<size_t>(sizes[i]) : 0;
    Region* region = regionOf(c, mhandles[i], data[i], size);
    if (region == nullptr || region->type != NCCL_PTR_CUDA) {
      TESTNET_WARN("iflush of %zu bytes at %p, which is not in a CUDA region registered on the comm", size, data[i]);
      return ncclInvalidArgument;
    }
  }
  auto* r = new Request{c, nullptr, 0};
  r->flush = true;
  r->flushEntries = n;
  *request = r;
  return ncclSuccess;
}

ncclResult_t testFlush(Request* r, int* done, int* sizes) {
  if (++r->tests < 2) return ncclSuccess;
  Comm* c = r->comm;
  while (!c->unflushed.empty()) {  // the flush passes every write before it
    Unflushed& u = c->unflushed.front();
    if (!cudaCopy(u.device, u.dst, u.bytes.get(), u.size, cudaMemcpyHostToDevice)) return ncclUnhandledCudaError;
    c->unflushed.pop_front();
  }
  c->flushes.fetch_add(r->flushEntries);
  gFlushes.fetch_add(r->flushEntries);
  *done = 1;
  if (sizes != nullptr) *sizes = 0;
  delete r;
  return ncclSuccess;
}

// A dma-buf registration as a NIC driver would take it: `data` is device
// memory, `fd` is an open file whose contents (a dma-buf's size is what
// SEEK_END reports) hold [offset, offset + size). The plugin keeps no copy
// of the fd: the caller may close it once this returns.
ncclResult_t cudaRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  *mhandle = nullptr;
  const int device = cudaDeviceOf(data);
  struct stat st {};
  if (type != NCCL_PTR_CUDA || device < 0) {
    TESTNET_WARN("regMrDmaBuf of %zu bytes at %p with type %d: not device memory of type NCCL_PTR_CUDA", size, data,
                 type);
    return ncclInvalidArgument;
  }
  if (fd < 0 || fstat(fd, &st) != 0) {
    TESTNET_WARN("regMrDmaBuf with fd %d, which is not an open file", fd);
    return ncclInvalidArgument;
  }
  const off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0 || static_cast<uint64_t>(end) < offset + size) {
    TESTNET_WARN("regMrDmaBuf of %zu bytes at offset %llu of a dma-buf of %lld bytes", size,
                 static_cast<unsigned long long>(offset), static_cast<long long>(end));
    return ncclInvalidArgument;
  }
  *mhandle = addRegion(static_cast<Comm*>(comm), data, size, NCCL_PTR_CUDA, device);
  return ncclSuccess;
}

// Every completed non-empty receive into CUDA memory needs a completed flush
// before the data may be read; a comm that closes with fewer flushes broke that.
ncclResult_t cudaCloseRecv(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (c != nullptr) {
    const long recvs = c->cudaRecvs.load(), flushes = c->flushes.load();
    if (gLog)
      gLog(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__,
           "nccl-test-net: receive comm closed: %ld receive(s) into CUDA memory, %ld flush(es) completed", recvs,
           flushes);
    if (flushes < recvs)
      TESTNET_WARN("%ld receive(s) into CUDA memory completed but only %ld flush(es): data read unflushed", recvs,
                   flushes);
  }
  return closeComm(comm);
}

}  // namespace testnet
