// Bring-up and teardown of verbs connections. The two ends exchange their
// IbConnMeta records over a TCP socket on the NCCL_SOCKET_IFNAME interface
// (the listen handle carries its address); the socket then stays open so a
// vanished peer shows up as EOF. connect() does the TCP connect and sends its
// record at once, then returns NULL until the receiver's record arrives;
// accept() returns NULL until a sender is queued on the listening socket.
#include "transports/net_ib/ib_comm.h"

#include "core/result.h"
#include "transports/net_ib/ib_comm_state.h"

#ifdef CHORUS_HAVE_IBVERBS
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "core/params.h"
#include "core/wait_limit.h"

namespace chorus::ib {
namespace {

constexpr uint32_t kHandleMagic = 0x43494248;  // "CIBH"
constexpr int kCqEntries = 4 * kIbSlots + 8;

struct IbListen {
  const IbDevice* dev = nullptr;
  ForkClosedFd sock;
};

// Handle: magic u32 | family u16 | port u16 (host order) | address 16 bytes.
void encodeHandle(const SockAddr& addr, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  std::memset(p, 0, CHORUS_NET_HANDLE_BYTES);
  std::memcpy(p, &kHandleMagic, 4);
  uint16_t family = static_cast<uint16_t>(addr.family()), port = addr.port();
  std::memcpy(p + 4, &family, 2);
  std::memcpy(p + 6, &port, 2);
  if (addr.family() == AF_INET)
    std::memcpy(p + 8, &reinterpret_cast<const sockaddr_in*>(addr.sa())->sin_addr, 4);
  else
    std::memcpy(p + 8, &reinterpret_cast<const sockaddr_in6*>(addr.sa())->sin6_addr, 16);
}

ncclResult_t decodeHandle(const void* in, SockAddr* addr) {
  const auto* p = static_cast<const uint8_t*>(in);
  uint32_t magic = 0;
  uint16_t family = 0, port = 0;
  if (p != nullptr) {
    std::memcpy(&magic, p, 4);
    std::memcpy(&family, p + 4, 2);
    std::memcpy(&port, p + 6, 2);
  }
  if (magic != kHandleMagic || port == 0 || (family != AF_INET && family != AF_INET6))
    return fail(ncclInvalidArgument, "NET/IB: connect handle is not an IB listen handle");
  *addr = SockAddr{};
  addr->storage.ss_family = family;
  if (family == AF_INET) {
    std::memcpy(&reinterpret_cast<sockaddr_in*>(addr->sa())->sin_addr, p + 8, 4);
    addr->len = sizeof(sockaddr_in);
  } else {
    std::memcpy(&reinterpret_cast<sockaddr_in6*>(addr->sa())->sin6_addr, p + 8, 16);
    addr->len = sizeof(sockaddr_in6);
  }
  addr->setPort(port);
  return ncclSuccess;
}

// Reads exactly n bytes before the deadline (the socket is non-blocking).
ncclResult_t readAll(int fd, uint8_t* buf, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, buf + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return fail(ncclRemoteError, "NET/IB: peer closed the setup socket");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return fail(ncclRemoteError, "NET/IB: reading the setup socket: %s", strerror(errno));
    if (Clock::now() > deadline)
      return fail(ncclRemoteError, "NET/IB: peer did not send its connection record in time");
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 50);
  }
  return ncclSuccess;
}

Clock::time_point setupDeadline() { return deadlineAfterMs(kNetSetupBoundMs); }

ncclResult_t qpKnobs(IbQpKnobs* knobs) { return qpKnobsFromValues(params::ibTimeout(), params::ibRetryCnt(), knobs); }

template <typename T>
ncclResult_t allocRegistered(IbComm* comm, size_t count, T** mem, ibv_mr** mr) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, count * sizeof(T)) != 0) return fail(ncclSystemError, "NET/IB: out of host memory");
  std::memset(p, 0, count * sizeof(T));
  *mem = static_cast<T*>(p);
  *mr = verbsApi()->regMr(comm->dev->pd, p, count * sizeof(T),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (*mr == nullptr)
    return fail(ncclSystemError, "NET/IB: registering %zu bytes failed: %s", count * sizeof(T), strerror(errno));
  return ncclSuccess;
}

// CQ, QP (and for a receiver the loopback flush QP); the caller fills in the rest.
ncclResult_t createResources(IbComm* comm) {
  comm->cq = verbsApi()->createCq(comm->dev->context, kCqEntries, nullptr, nullptr, 0);
  if (comm->cq == nullptr) return fail(ncclSystemError, "NET/IB: ibv_create_cq failed: %s", strerror(errno));
  CHORUS_CHECK(createQp(*comm->dev, comm->cq, 2 * kIbSlots + 2, kIbSlots, &comm->qp));
  if (comm->isSend) return allocRegistered(comm, kIbSlots, &comm->fifo, &comm->fifoMr);
  CHORUS_CHECK(allocRegistered(comm, kIbSlots, &comm->staging, &comm->stagingMr));
  CHORUS_CHECK(allocRegistered(comm, 64, &comm->flushBuf, &comm->flushMr));
  CHORUS_CHECK(createQp(*comm->dev, comm->cq, 2, 1, &comm->flushQp));
  IbQpKnobs knobs;
  CHORUS_CHECK(qpKnobs(&knobs));
  return connectQp(comm->flushQp, comm->flushQp.local, knobs);  // loopback: its own peer
}

IbConnMeta localRecord(const IbComm* comm) {
  IbConnMeta meta = comm->qp.local;
  if (comm->isSend) {
    meta.fifoAddr = reinterpret_cast<uintptr_t>(comm->fifo);
    meta.fifoRkey = comm->fifoMr->rkey;
  }
  return meta;
}

struct PendingConnect {
  IbComm* comm = nullptr;
  Clock::time_point deadline;
};
using HandleBytes = std::array<uint8_t, CHORUS_NET_HANDLE_BYTES>;

// The registry of connects waiting for the receiver's record, keyed by handle
// bytes (connect is retried with the same handle until it returns a comm).
struct IbPendingConnects {
  std::mutex mu;
  std::map<HandleBytes, PendingConnect> byHandle;
  static IbPendingConnects& get() {
    static IbPendingConnects registry;
    return registry;
  }
};

ncclResult_t beginConnect(int dev, const SockAddr& target, IbComm** out) {
  std::unique_ptr<IbComm> comm(new IbComm);
  comm->isSend = true;
  if ((comm->dev = ibDevice(dev)) == nullptr) return ncclInvalidArgument;
  int err = connectOnce(target, waitBoundAfter(kNetSetupBoundMs), &comm->sock);
  if (err != 0)
    return fail(ncclRemoteError, "NET/IB: cannot reach listener %s: %s", target.str().c_str(), strerror(err));
  ncclResult_t res = createResources(comm.get());
  uint8_t record[kConnMetaBytes];
  if (res == ncclSuccess) {
    encodeConnMeta(localRecord(comm.get()), record);
    if ((err = writeAll(comm->sock.get(), record, sizeof(record), setupDeadline())) != 0)
      res = fail(ncclRemoteError, "NET/IB: sending the connection record: %s", strerror(err));
  }
  if (res != ncclSuccess) {
    destroyComm(comm.release());
    return res;
  }
  *out = comm.release();
  return ncclSuccess;
}

// True once the receiver's record arrived and the QP is connected.
ncclResult_t finishConnect(IbComm* comm, bool* done) {
  uint8_t peek[kConnMetaBytes];
  ssize_t avail = recv(comm->sock.get(), peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
  if (avail == 0) return fail(ncclRemoteError, "NET/IB: receiver closed the connection during setup");
  if (avail < static_cast<ssize_t>(kConnMetaBytes)) return ncclSuccess;
  uint8_t record[kConnMetaBytes];
  CHORUS_CHECK(readAll(comm->sock.get(), record, sizeof(record), setupDeadline()));
  IbConnMeta remote;
  CHORUS_CHECK(decodeConnMeta(record, sizeof(record), &remote));
  IbQpKnobs knobs;
  CHORUS_CHECK(qpKnobs(&knobs));
  CHORUS_CHECK(connectQp(comm->qp, remote, knobs));
  *done = true;
  return ncclSuccess;
}

}  // namespace

void destroyComm(IbComm* comm) {
  const VerbsApi* api = verbsApi();
  destroyQp(&comm->qp);
  destroyQp(&comm->flushQp);
  for (ibv_mr* mr : {comm->fifoMr, comm->stagingMr, comm->flushMr})
    if (mr != nullptr) api->deregMr(mr);
  if (comm->cq != nullptr) api->destroyCq(comm->cq);
  free(comm->fifo);
  free(comm->staging);
  free(comm->flushBuf);
  delete comm;
}

ncclResult_t ibListen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return fail(ncclInvalidArgument, "NET/IB: listen: NULL argument");
  *listenComm = nullptr;
  const IbDevice* device = ibDevice(dev);
  if (device == nullptr) return ncclInvalidArgument;
  InterfaceInfo iface;
  CHORUS_CHECK(chooseInterface(params::socketIfname(), &iface));
  auto l = std::make_unique<IbListen>();
  l->dev = device;
  SockAddr bound;
  CHORUS_CHECK(listenSocket(iface.addr, &l->sock, &bound));
  encodeHandle(bound, handle);
  *listenComm = l.release();
  return ncclSuccess;
}

ncclResult_t ibConnect(int dev, const void* handle, void** sendComm) {
  if (sendComm == nullptr) return fail(ncclInvalidArgument, "NET/IB: connect: NULL sendComm");
  *sendComm = nullptr;
  SockAddr target;
  CHORUS_CHECK(decodeHandle(handle, &target));
  HandleBytes key;
  std::memcpy(key.data(), handle, key.size());
  auto& pending = IbPendingConnects::get();
  PendingConnect pc;
  {
    std::lock_guard<std::mutex> lock(pending.mu);
    auto it = pending.byHandle.find(key);
    if (it != pending.byHandle.end()) {
      pc = it->second;
      pending.byHandle.erase(it);
    }
  }
  if (pc.comm == nullptr) {
    CHORUS_CHECK(beginConnect(dev, target, &pc.comm));
    pc.deadline = setupDeadline();
  }
  bool done = false;
  ncclResult_t res = finishConnect(pc.comm, &done);
  if (res == ncclSuccess && !done && Clock::now() > pc.deadline)
    res = fail(ncclRemoteError, "NET/IB: receiver %s never accepted", target.str().c_str());
  if (res != ncclSuccess) {
    destroyComm(pc.comm);
    return res;
  }
  if (done) {
    *sendComm = pc.comm;
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(pending.mu);
  pending.byHandle[key] = pc;
  return ncclSuccess;
}

ncclResult_t ibAccept(void* listenComm, void** recvComm) {
  auto* l = static_cast<IbListen*>(listenComm);
  if (l == nullptr || recvComm == nullptr) return fail(ncclInvalidArgument, "NET/IB: accept: NULL argument");
  *recvComm = nullptr;
  int fd = accept4(l->sock.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
    return fail(ncclSystemError, "NET/IB: accept: %s", strerror(errno));
  }
  std::unique_ptr<IbComm> comm(new IbComm);
  comm->sock = ForkClosedFd(fd);
  comm->dev = l->dev;
  uint8_t record[kConnMetaBytes];
  IbConnMeta remote;
  IbQpKnobs knobs;
  ncclResult_t res = readAll(fd, record, sizeof(record), setupDeadline());
  if (res == ncclSuccess) res = decodeConnMeta(record, sizeof(record), &remote);
  if (res == ncclSuccess) res = qpKnobs(&knobs);
  if (res == ncclSuccess) res = createResources(comm.get());
  if (res == ncclSuccess) res = connectQp(comm->qp, remote, knobs);
  if (res == ncclSuccess) {
    comm->remoteFifoAddr = remote.fifoAddr;
    comm->remoteFifoRkey = remote.fifoRkey;
    encodeConnMeta(localRecord(comm.get()), record);
    int err = writeAll(fd, record, sizeof(record), setupDeadline());
    if (err != 0) res = fail(ncclRemoteError, "NET/IB: sending the connection record: %s", strerror(err));
  }
  if (res != ncclSuccess) {
    destroyComm(comm.release());
    return res;
  }
  *recvComm = comm.release();
  return ncclSuccess;
}

ncclResult_t ibCloseSend(void* sendComm) {
  if (sendComm != nullptr) destroyComm(static_cast<IbComm*>(sendComm));
  return ncclSuccess;
}

ncclResult_t ibCloseRecv(void* recvComm) {
  if (recvComm != nullptr) destroyComm(static_cast<IbComm*>(recvComm));
  return ncclSuccess;
}

ncclResult_t ibCloseListen(void* listenComm) {
  delete static_cast<IbListen*>(listenComm);
  return ncclSuccess;
}

}  // namespace chorus::ib

#else  // !CHORUS_HAVE_IBVERBS

namespace chorus::ib {
namespace {
ncclResult_t unavailable() { return fail(ncclInvalidUsage, "NET/IB: built without InfiniBand verbs support"); }
}  // namespace
ncclResult_t ibListen(int, void*, void**) { return unavailable(); }
ncclResult_t ibConnect(int, const void*, void**) { return unavailable(); }
ncclResult_t ibAccept(void*, void**) { return unavailable(); }
ncclResult_t ibCloseSend(void*) { return ncclSuccess; }
ncclResult_t ibCloseRecv(void*) { return ncclSuccess; }
ncclResult_t ibCloseListen(void*) { return ncclSuccess; }
}  // namespace chorus::ib

#endif  // CHORUS_HAVE_IBVERBS
