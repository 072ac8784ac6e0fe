// A network plugin with NCCL's binary interface (ncclNet_v6 / v8 / v11 tables),
// written for the tests: one device, loopback TCP, one framed message per
// isend/irecv. It links nothing of Chorus and checks what real plugins rely
// on: every buffer given to isend/irecv lies in a region registered with regMr
// on that comm and not yet deregistered, irecv never groups more than
// maxRecvs, and the v11 context from init comes back to listen/connect.
//
// Build variants (compile definitions) choose what is exported:
//   TESTNET_V6, TESTNET_V8, TESTNET_V11   export that table (any combination)
//   TESTNET_V12_ONLY      only a table named for a version newer than v11
//   TESTNET_REWRITE       the v11 table is empty until init fills it in
//   TESTNET_FAIL=<what>   init | zerodev | nullfn | props | isend: misbehave
//   TESTNET_CUDA          (with TESTNET_V11) claims NCCL_PTR_CUDA: CUDA regions
//                         travel through host bounce buffers, and received
//                         bytes reach device memory only when a later iflush
//                         completes (nccl_test_net_cuda.cc); links cudart
//   TESTNET_DMABUF        (with TESTNET_CUDA) takes device memory only as a
//                         dma-buf: regMrDmaBuf checks the fd, and regMr
//                         refuses CUDA pointers
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>

#include "tests/transports_plugin/nccl_test_net.h"

#define TESTNET_EXPORT extern "C" __attribute__((visibility("default")))
#define TESTNET_TABLE __attribute__((visibility("default")))

#define TESTNET_FAIL_NONE 0
#define TESTNET_FAIL_INIT 1
#define TESTNET_FAIL_ZERODEV 2
#define TESTNET_FAIL_NULLFN 3
#define TESTNET_FAIL_PROPS 4
#define TESTNET_FAIL_ISEND 5
#ifndef TESTNET_FAIL
#define TESTNET_FAIL TESTNET_FAIL_NONE
#endif

// Named like a function inside Chorus (chorus::lastErrorMessage). The plugin
// must call its own copy, and Chorus its own: libnccl.so.2 exports neither.
namespace chorus {
__attribute__((visibility("default"), noinline)) const char* lastErrorMessage() { return "nccl-test-net's own"; }
}  // namespace chorus

namespace testnet {

ncclDebugLogger_t gLog = nullptr;
std::atomic<long> gViolations{0};
#if defined(TESTNET_CUDA)
std::atomic<long> gFlushes{0};
#endif

namespace {
constexpr uint32_t kMagic = 0x7e57ae75;
constexpr int kCtxToken = 4711;

std::atomic<long> gSends{0};
std::atomic<long> gRecvs{0};
int gCtx = kCtxToken;

struct Handle {
  uint32_t magic;
  uint16_t port;
};

std::mutex gRegionsMu;
std::set<Region*> gAllRegions;  // every live registration, to validate mhandles
}  // namespace

Region* regionOf(Comm* comm, void* mhandle, const void* data, size_t size) {
  std::lock_guard<std::mutex> lock(gRegionsMu);
  auto* r = static_cast<Region*>(mhandle);
  if (gAllRegions.count(r) == 0 || r->comm != comm) return nullptr;
  const char* p = static_cast<const char*>(data);
  return p >= r->data && p + size <= r->data + r->size ? r : nullptr;
}

// Moves bytes for the request at the head of the queue until EAGAIN. false: the connection broke.
bool progressHead(Request* r) {
  Comm* c = r->comm;
  while (r->headerDone < sizeof(r->header)) {
    char* h = reinterpret_cast<char*>(&r->header) + r->headerDone;
    const size_t left = sizeof(r->header) - r->headerDone;
    const ssize_t n = c->sender ? send(c->fd, h, left, MSG_NOSIGNAL) : recv(c->fd, h, left, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    if (n <= 0) return false;
    r->headerDone += static_cast<size_t>(n);
  }
  if (!c->sender && r->header > r->capacity) {
    TESTNET_WARN("a %llu-byte message for a %zu-byte receive", (unsigned long long)r->header, r->capacity);
    return false;
  }
  while (r->bodyDone < r->header) {
    char* p = r->data + r->bodyDone;
    const size_t left = r->header - r->bodyDone;
    const ssize_t n = c->sender ? send(c->fd, p, left, MSG_NOSIGNAL) : recv(c->fd, p, left, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
    if (n <= 0) return false;
    r->bodyDone += static_cast<size_t>(n);
  }
  r->complete = true;
  return true;
}

bool progress(Comm* c) {
  while (!c->queue.empty()) {
    Request* head = c->queue.front();
    if (!progressHead(head)) return false;
    if (!head->complete) return true;
    c->queue.pop_front();
  }
  return true;
}

void setNonBlocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// ---- the operations, in their widest form; each table adapts to these ----

ncclResult_t doInit(ncclDebugLogger_t log, int version) {
  gLog = log;
  if (gLog) gLog(NCCL_LOG_INFO, NCCL_NET | NCCL_INIT, __FILE__, __LINE__, "nccl-test-net: init (table v%d)", version);
  if (TESTNET_FAIL == TESTNET_FAIL_INIT) return ncclSystemError;
  return ncclSuccess;
}

ncclResult_t devices(int* ndev) {
  *ndev = TESTNET_FAIL == TESTNET_FAIL_ZERODEV ? 0 : 1;
  return ncclSuccess;
}

template <class Props>
ncclResult_t fillProps(int dev, Props* p) {
  if (dev != 0 || TESTNET_FAIL == TESTNET_FAIL_PROPS) return ncclInvalidArgument;
  memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>("testlo");
  p->pciPath = nullptr;
  p->guid = 0x7e57;
  p->ptrSupport = kDmaBuf ? (NCCL_PTR_HOST | NCCL_PTR_DMABUF) : kCuda ? (NCCL_PTR_HOST | NCCL_PTR_CUDA) : NCCL_PTR_HOST;
  p->speed = 10000;
  p->port = 1;
  p->latency = 0;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  return ncclSuccess;
}

ncclResult_t doListen(int dev, void* handle, void** listenComm) {
  if (dev != 0) return ncclInvalidArgument;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return ncclSystemError;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return ncclSystemError;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  Handle h{kMagic, a.sin_port};
  memcpy(handle, &h, sizeof(h));
  auto* c = new Comm;
  c->fd = fd;
  *listenComm = c;
  return ncclSuccess;
}

ncclResult_t doConnect(int dev, void* handle, void** sendComm) {
  Handle h;
  memcpy(&h, handle, sizeof(h));
  if (dev != 0 || h.magic != kMagic) return ncclInvalidArgument;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = h.port;
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  setNonBlocking(fd);
  auto* c = new Comm;
  c->fd = fd;
  c->sender = true;
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t doAccept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  const int fd = accept(static_cast<Comm*>(listenComm)->fd, nullptr, nullptr);
  if (fd < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? ncclSuccess : ncclSystemError;
  setNonBlocking(fd);
  auto* c = new Comm;
  c->fd = fd;
  *recvComm = c;
  return ncclSuccess;
}

Region* addRegion(Comm* comm, void* data, size_t size, int type, int device) {
  auto* r = new Region{comm, static_cast<char*>(data), size, type, device};
  std::lock_guard<std::mutex> lock(gRegionsMu);
  gAllRegions.insert(r);
  comm->regions.insert(r);
  return r;
}

ncclResult_t doRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != NCCL_PTR_HOST && !(kCuda && !kDmaBuf && type == NCCL_PTR_CUDA)) {
    TESTNET_WARN("regMr with pointer type %d, only %s supported", type,
                 kCuda && !kDmaBuf ? "host and CUDA memory are" : "host memory is");
    return ncclInvalidArgument;
  }
  int device = -1;
#if defined(TESTNET_CUDA)
  if (type == NCCL_PTR_CUDA) {
    device = cudaDeviceOf(data);
    if (device < 0) {
      TESTNET_WARN("regMr of %zu bytes at %p as NCCL_PTR_CUDA, which is not device memory", size, data);
      return ncclInvalidArgument;
    }
  }
#endif
  *mhandle = addRegion(static_cast<Comm*>(comm), data, size, type, device);
  return ncclSuccess;
}

ncclResult_t regMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInvalidUsage; }

ncclResult_t deregMr(void* comm, void* mhandle) {
  auto* r = static_cast<Region*>(mhandle);
  std::lock_guard<std::mutex> lock(gRegionsMu);
  if (gAllRegions.erase(r) == 0 || r->comm != comm) {
    TESTNET_WARN("deregMr of a handle that is not registered on this comm");
    return ncclInvalidArgument;
  }
  r->comm->regions.erase(r);
  delete r;
  return ncclSuccess;
}

ncclResult_t post(void* comm, void* data, size_t size, void* mhandle, bool send, void** request) {
  auto* c = static_cast<Comm*>(comm);
  *request = nullptr;
  if (c->sender != send) return ncclInvalidUsage;
  Region* region = regionOf(c, mhandle, data, size);
  if (region == nullptr) {
    TESTNET_WARN("%s of %zu bytes outside any region registered on the comm", send ? "isend" : "irecv", size);
    return ncclInvalidArgument;
  }
  auto* r = new Request{c, static_cast<char*>(data), size};
  if (send) r->header = size;
#if defined(TESTNET_CUDA)
  if (region->type == NCCL_PTR_CUDA) {
    r->bounce.reset(new char[size > 0 ? size : 1]);
    r->data = r->bounce.get();
    if (!send) {
      r->cudaDst = static_cast<char*>(data);
      r->cudaDevice = region->device;
    } else if (size > 0 && !cudaCopy(region->device, r->data, data, size, cudaMemcpyDeviceToHost)) {
      delete r;
      return ncclUnhandledCudaError;
    }
  }
#else
  (void)region;
#endif
  c->queue.push_back(r);
  (send ? gSends : gRecvs).fetch_add(1);
  *request = r;
  return ncclSuccess;
}

ncclResult_t doIsend(void* comm, void* data, size_t size, void* mhandle, void** request) {
  if (TESTNET_FAIL == TESTNET_FAIL_ISEND) return ncclSystemError;
  return post(comm, data, size, mhandle, true, request);
}

template <class Size>
ncclResult_t doIrecv(void* comm, int n, void** data, Size* sizes, void** mhandles, void** request) {
  if (n != 1) {  // maxRecvs is 1
    TESTNET_WARN("irecv grouping %d receives, maxRecvs is 1", n);
    return ncclInvalidArgument;
  }
  return post(comm, data[0], static_cast<size_t>(sizes[0]), mhandles[0], false, request);
}

ncclResult_t iflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  *done = 0;
#if defined(TESTNET_CUDA)
  if (r->flush) return testFlush(r, done, sizes);
#endif
  if (!progress(r->comm)) return ncclRemoteError;
  if (!r->complete) return ncclSuccess;
#if defined(TESTNET_CUDA)
  if (r->cudaDst != nullptr && r->header > 0) {
    r->comm->unflushed.push_back(Unflushed{r->cudaDevice, r->cudaDst, std::move(r->bounce), r->header});
    r->comm->cudaRecvs.fetch_add(1);
  }
#endif
  *done = 1;
  if (sizes != nullptr) *sizes = static_cast<int>(r->header);
  delete r;
  return ncclSuccess;
}

ncclResult_t closeComm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return ncclSuccess;
  if (c->fd >= 0) close(c->fd);
  for (Request* r : c->queue) delete r;
  {
    std::lock_guard<std::mutex> lock(gRegionsMu);
    if (!c->regions.empty()) TESTNET_WARN("comm closed with %zu registration(s) left", c->regions.size());
    for (Region* r : c->regions) gAllRegions.erase(r);
  }
  delete c;
  return ncclSuccess;
}

bool checkCtx(void* ctx) {
  if (ctx == &gCtx) return true;
  TESTNET_WARN("v11 call without the context init returned");
  return false;
}

// ---- the exported tables ----

#if defined(TESTNET_V6)
ncclResult_t v6Init(ncclDebugLogger_t log) { return doInit(log, 6); }
ncclResult_t v6Props(int dev, ncclNetProperties_v6_t* p) { return fillProps(dev, p); }
ncclResult_t v6Connect(int dev, void* handle, void** sendComm) { return doConnect(dev, handle, sendComm); }
ncclResult_t v6RegMr(void* comm, void* data, int size, int type, void** mh) {
  return doRegMr(comm, data, static_cast<size_t>(size), type, mh);
}
ncclResult_t v6Isend(void* comm, void* data, int size, int, void* mh, void** req) {
  return doIsend(comm, data, static_cast<size_t>(size), mh, req);
}
ncclResult_t v6Irecv(void* comm, int n, void** data, int* sizes, int*, void** mh, void** req) {
  return doIrecv(comm, n, data, sizes, mh, req);
}
#endif

#if defined(TESTNET_V8)
ncclResult_t v8Init(ncclDebugLogger_t log) { return doInit(log, 8); }
ncclResult_t v8Props(int dev, ncclNetProperties_v8_t* p) { return fillProps(dev, p); }
ncclResult_t v8Connect(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t** devComm) {
  if (devComm != nullptr && *devComm != nullptr) return ncclInvalidUsage;  // no offload
  return doConnect(dev, handle, sendComm);
}
ncclResult_t v8Accept(void* l, void** recvComm, ncclNetDeviceHandle_t**) { return doAccept(l, recvComm); }
ncclResult_t v8Isend(void* comm, void* data, int size, int, void* mh, void** req) {
  return doIsend(comm, data, static_cast<size_t>(size), mh, req);
}
ncclResult_t v8Irecv(void* comm, int n, void** data, int* sizes, int*, void** mh, void** req) {
  return doIrecv(comm, n, data, sizes, mh, req);
}
#endif

#if defined(TESTNET_V11) || defined(TESTNET_REWRITE)
ncclResult_t v11Props(int dev, ncclNetProperties_v11_t* p) {
  const ncclResult_t res = fillProps(dev, p);
  p->maxP2pBytes = p->maxCollBytes = INT_MAX;
  p->maxMultiRequestSize = 1;
  return res;
}
ncclResult_t v11Listen(void* ctx, int dev, void* handle, void** listenComm) {
  return checkCtx(ctx) ? doListen(dev, handle, listenComm) : ncclInvalidUsage;
}
ncclResult_t v11Connect(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_t** devComm) {
  if (!checkCtx(ctx) || (devComm != nullptr && *devComm != nullptr)) return ncclInvalidUsage;
  return doConnect(dev, handle, sendComm);
}
ncclResult_t v11Accept(void* l, void** recvComm, ncclNetDeviceHandle_t**) { return doAccept(l, recvComm); }
ncclResult_t v11Isend(void* comm, void* data, size_t size, int, void* mh, void*, void** req) {
  return doIsend(comm, data, size, mh, req);
}
ncclResult_t v11Irecv(void* comm, int n, void** data, size_t* sizes, int*, void** mh, void**, void** req) {
  return doIrecv(comm, n, data, sizes, mh, req);
}
ncclResult_t v11Finalize(void* ctx) { return checkCtx(ctx) ? ncclSuccess : ncclInvalidUsage; }

ncclNet_v11_t fullV11(const char* name) {
  ncclNet_v11_t t{};
  t.name = name;
  t.devices = devices;
  t.getProperties = v11Props;
  t.listen = v11Listen;
  t.connect = v11Connect;
  t.accept = v11Accept;
  t.regMr = doRegMr;
  t.regMrDmaBuf = regMrDmaBuf;
  t.deregMr = deregMr;
  t.isend = v11Isend;
  t.irecv = v11Irecv;
  t.iflush = iflush;
  t.test = test;
  t.closeSend = closeComm;
  t.closeRecv = closeComm;
#if defined(TESTNET_CUDA)
  t.iflush = cudaIflush;
  t.closeRecv = cudaCloseRecv;
#endif
#if defined(TESTNET_DMABUF)
  t.regMrDmaBuf = cudaRegMrDmaBuf;
#endif
  t.closeListen = closeComm;
  t.finalize = v11Finalize;
  if (TESTNET_FAIL == TESTNET_FAIL_NULLFN) t.test = nullptr;
  return t;
}
ncclResult_t v11Init(void** ctx, uint64_t, ncclNetCommConfig_t*, ncclDebugLogger_t log, ncclProfilerCallback_t);
#endif

}  // namespace testnet

#if defined(TESTNET_REWRITE)
extern "C" {
extern TESTNET_TABLE ncclNet_v11_t ncclNetPlugin_v11;
}
#endif

#if defined(TESTNET_V11) || defined(TESTNET_REWRITE)
namespace testnet {
ncclResult_t v11Init(void** ctx, uint64_t, ncclNetCommConfig_t* config, ncclDebugLogger_t log, ncclProfilerCallback_t) {
  if (config == nullptr || config->trafficClass != NCCL_NET_TRAFFIC_CLASS_UNDEF) return ncclInvalidArgument;
#if defined(TESTNET_REWRITE)
  ncclNetPlugin_v11 = fullV11("TestNcclNet_rewritten");
  ncclNetPlugin_v11.init = v11Init;
#endif
  *ctx = &gCtx;
  return doInit(log, 11);
}
}  // namespace testnet
#endif

using namespace testnet;  // the tables below name the plugin's functions

extern "C" {
#if defined(TESTNET_V6)
TESTNET_TABLE ncclNet_v6_t ncclNetPlugin_v6 = {"TestNcclNet_v6", v6Init,  devices,     v6Props,   doListen, v6Connect,
                                               doAccept,         v6RegMr, regMrDmaBuf, deregMr,   v6Isend,  v6Irecv,
                                               iflush,           test,    closeComm,   closeComm, closeComm};
#endif

#if defined(TESTNET_V8)
TESTNET_TABLE ncclNet_v8_t ncclNetPlugin_v8 = {
    "TestNcclNet_v8", v8Init,  devices, v8Props, doListen,  v8Connect, v8Accept,  doRegMr, regMrDmaBuf, deregMr,
    v8Isend,          v8Irecv, iflush,  test,    closeComm, closeComm, closeComm, nullptr, nullptr};
#endif

#if defined(TESTNET_REWRITE)
// Only name and init are set at load time; init writes the working table
// into this very variable, as some real plugins do.
TESTNET_TABLE ncclNet_v11_t ncclNetPlugin_v11 = [] {
  ncclNet_v11_t t{};
  t.name = "TestNcclNet_rewrite";
  t.init = v11Init;
  return t;
}();
#elif defined(TESTNET_V11)
TESTNET_TABLE ncclNet_v11_t ncclNetPlugin_v11 = [] {
  ncclNet_v11_t t = fullV11(kDmaBuf ? "TestNcclNet_dmabuf" : kCuda ? "TestNcclNet_cuda" : "TestNcclNet_v11");
  t.init = v11Init;
  return t;
}();
#endif

#if defined(TESTNET_V12_ONLY)
// Something from a future NCCL: Chorus must refuse it by name, not call it.
struct FutureTable {
  const char* name;
  void* entries[32];
};
TESTNET_TABLE FutureTable ncclNetPlugin_v12 = {"TestNcclNet_v12", {}};
#endif

// What the tests ask the plugin afterwards.
TESTNET_TABLE long ncclTestNetViolations() { return gViolations.load(); }
TESTNET_TABLE long ncclTestNetSends() { return gSends.load(); }
TESTNET_TABLE long ncclTestNetRecvs() { return gRecvs.load(); }
#if defined(TESTNET_CUDA)
TESTNET_TABLE long ncclTestNetFlushes() { return gFlushes.load(); }
#endif
TESTNET_TABLE const char* ncclTestNetWhoseLastError() { return chorus::lastErrorMessage(); }
}  // extern "C"
