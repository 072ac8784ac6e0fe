// What the parts of the NCCL-ABI test plugin share (nccl_test_net.cc, and
// nccl_test_net_cuda.cc in the cuda variant): its comm, registration and
// request records, the violation log and counters. Everything lives in the
// plugin's own namespace and has hidden visibility; only the ncclNetPlugin_vN
// tables and the ncclTestNet* queries are exported.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <set>

#if defined(TESTNET_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "transports/net/nccl_net_abi.h"

#if defined(TESTNET_CUDA) && !defined(TESTNET_V11)
#error "TESTNET_CUDA is a v11 table: define TESTNET_V11 too"
#endif
#if defined(TESTNET_DMABUF) && !defined(TESTNET_CUDA)
#error "TESTNET_DMABUF takes device memory: define TESTNET_CUDA too"
#endif

namespace testnet {

extern ncclDebugLogger_t gLog;
extern std::atomic<long> gViolations;
#if defined(TESTNET_CUDA)
extern std::atomic<long> gFlushes;
constexpr bool kCuda = true;
#else
constexpr bool kCuda = false;
#endif
// The dma-buf variant takes device memory only as a dma-buf (regMrDmaBuf),
// never through regMr: NCCL_PTR_DMABUF without NCCL_PTR_CUDA.
#if defined(TESTNET_DMABUF)
constexpr bool kDmaBuf = true;
#else
constexpr bool kDmaBuf = false;
#endif

// The CUDA variant tags every violation with a fixed text that a log can be
// searched for ("nccl-test-net: VIOLATION: "); the others log as before.
#if defined(TESTNET_CUDA)
#define TESTNET_VIOLATION_TAG "VIOLATION: "
#else
#define TESTNET_VIOLATION_TAG ""
#endif
#define TESTNET_WARN(fmt, ...)                                                                 \
  do {                                                                                         \
    ::testnet::gViolations.fetch_add(1);                                                       \
    if (::testnet::gLog)                                                                       \
      ::testnet::gLog(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__,                             \
                      "nccl-test-net: " TESTNET_VIOLATION_TAG fmt __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)

struct Comm;
struct Region {
  Comm* comm;
  char* data;
  size_t size;
  int type = NCCL_PTR_HOST;
  int device = -1;  // CUDA regions: the device the memory belongs to
};

struct Request {
  Comm* comm;
  char* data;
  size_t capacity;
  uint64_t header = 0;  // message size, sent/received first
  size_t headerDone = 0;
  size_t bodyDone = 0;
  bool complete = false;
#if defined(TESTNET_CUDA)
  std::unique_ptr<char[]> bounce = nullptr;  // host stand-in for a CUDA region's bytes
  char* cudaDst = nullptr;                   // irecv into a CUDA region: where the bytes go on completion
  int cudaDevice = -1;
  bool flush = false;  // an iflush request: done on its second test
  int flushEntries = 0;
  int tests = 0;
#endif
};

#if defined(TESTNET_CUDA)
// A completed receive's bytes that have not reached device memory yet: they
// land only when a later flush completes, as a NIC's writes become visible
// to the GPU only once a flush has passed them.
struct Unflushed {
  int device = -1;
  char* dst = nullptr;
  std::unique_ptr<char[]> bytes;
  size_t size = 0;
};
#endif

struct Comm {
  int fd = -1;
  bool sender = false;
  std::deque<Request*> queue;
  std::set<Region*> regions;
#if defined(TESTNET_CUDA)
  std::atomic<long> cudaRecvs{0};   // completed non-empty receives into CUDA regions
  std::atomic<long> flushes{0};     // regions named by completed flushes
  std::deque<Unflushed> unflushed;  // the proxy thread is the only caller of test
#endif
};

// The live region of `comm` behind mhandle that holds [data, data + size), or null.
Region* regionOf(Comm* comm, void* mhandle, const void* data, size_t size);
// Registers [data, data + size) of `type` on `comm` (device: CUDA regions).
Region* addRegion(Comm* comm, void* data, size_t size, int type, int device);
ncclResult_t closeComm(void* comm);

#if defined(TESTNET_CUDA)
// CUDA regions (nccl_test_net_cuda.cc).
int cudaDeviceOf(const void* p);
bool cudaCopy(int dev, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
ncclResult_t cudaIflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request);
ncclResult_t testFlush(Request* r, int* done, int* sizes);
ncclResult_t cudaCloseRecv(void* comm);
ncclResult_t cudaRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
#endif

}  // namespace testnet
