// Socket backend setup. listen() binds an ephemeral port on the device's
// address and puts address + a random nonce in the handle. connect() opens
// the control stream and the data streams one after the other (a listening
// socket completes a TCP handshake without being accepted, so this waits
// only for the network round trip) and opens each with a StreamHello.
// accept() never blocks: it takes what the kernel has queued, reads hellos as
// they arrive, refuses streams with a wrong nonce or from a second connection,
// and hands out the connection once all of its streams are in.
#include "transports/net_socket/socket_setup.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "core/host_identity.h"
#include "core/params.h"
#include "core/result.h"
#include "core/wait_limit.h"
#include "topo/discover_sources.h"

namespace chorus::sock {
namespace {

uint64_t random64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

int familyFromEnv() {
  std::string f = params::socketFamily();
  if (f.empty()) return AF_UNSPEC;
  if (f == "AF_INET" || f == "4") return AF_INET;
  if (f == "AF_INET6" || f == "6") return AF_INET6;
  CHORUS_WARN(kLogNet, "ignoring NCCL_SOCKET_FAMILY=%s (expected AF_INET or AF_INET6)", f.c_str());
  return AF_UNSPEC;
}

int readSpeedMbps(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long v = 0;
  if (!(f >> v) || v <= 0 || v > INT_MAX) return 0;
  return static_cast<int>(v);
}

std::string readPciPath(const std::string& ifname) {
  char resolved[PATH_MAX];
  std::string link = "/sys/class/net/" + ifname + "/device";
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

struct DeviceCache {
  std::mutex mu;
  std::string key;
  std::shared_ptr<const std::vector<Device>> list;
  std::vector<std::shared_ptr<const std::vector<Device>>> retired;  // property strings may still point here
};

DeviceCache& deviceCache() {
  static DeviceCache* cache = new DeviceCache;  // never destroyed: used by the proxy thread until exit
  return *cache;
}

struct PendingStream {
  ForkClosedFd fd;
  SockAddr from;
  StreamHello hello{};
  size_t got = 0;
};

struct ListenComm {
  ForkClosedFd fd;
  SockAddr bound;
  uint64_t nonce = 0;
  std::vector<PendingStream> pending;
  bool haveConn = false;
  uint64_t connId = 0;
  uint32_t nthreads = 0, nsocks = 0;
  uint64_t peerToken = 0;
  SockAddr peer;
  ForkClosedFd ctrl;
  std::vector<ForkClosedFd> data;
  uint32_t dataIn = 0;
  bool handedOut = false;
};

int connectBounded(const SockAddr& addr, Clock::time_point deadline, ForkClosedFd* fd) {
  int err = 0;
  do {
    err = connectOnce(addr, WaitBound{deadline, nullptr, {}}, fd);
    if (err == 0 || !connectRetryable(err)) return err;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (Clock::now() < deadline);
  return err;
}

// Places a stream whose hello is complete; false if it is refused.
bool placeStream(ListenComm& lc, PendingStream& ps) {
  const StreamHello& h = ps.hello;
  const std::string from = ps.from.str();
  if (const char* why = refuseHello(h, lc.nonce)) {
    CHORUS_WARN(kLogNet, "socket: refused a connection from %s on %s: %s", from.c_str(), lc.bound.str().c_str(), why);
    return false;
  }
  if (!lc.haveConn) {
    const int64_t ndata = helloDataStreams(h);
    if (ndata < 0) {
      CHORUS_WARN(kLogNet, "socket: refused a connection from %s: %u x %u data streams", from.c_str(), h.nthreads,
                  h.nsocks);
      return false;
    }
    lc.haveConn = true;
    lc.connId = h.connId;
    lc.peerToken = h.processToken;
    lc.nthreads = h.nthreads;
    lc.nsocks = h.nsocks;
    lc.data.resize(static_cast<size_t>(ndata));
  }
  const size_t ndata = lc.data.size();
  if (h.connId != lc.connId || h.stream > ndata || (h.stream == 0 && lc.ctrl.valid()) ||
      (h.stream > 0 && lc.data[h.stream - 1].valid())) {
    CHORUS_WARN(kLogNet, "socket: refused stream %u from %s on %s: not part of the connection being accepted", h.stream,
                from.c_str(), lc.bound.str().c_str());
    return false;
  }
  if (h.stream == 0) {
    lc.ctrl = std::move(ps.fd);
    lc.peer = ps.from;
  } else {
    lc.data[h.stream - 1] = std::move(ps.fd);
    ++lc.dataIn;
  }
  return true;
}

// Reads more of a pending stream's hello. Returns false when the stream is done with (placed or dropped).
bool advancePending(ListenComm& lc, PendingStream& ps) {
  for (;;) {
    ssize_t n = recv(ps.fd.get(), reinterpret_cast<char*>(&ps.hello) + ps.got, sizeof(ps.hello) - ps.got, MSG_DONTWAIT);
    if (n > 0) {
      ps.got += static_cast<size_t>(n);
      if (ps.got < sizeof(ps.hello)) continue;
      placeStream(lc, ps);
      return false;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // closed before its hello: drop it
  }
}

void acceptQueued(ListenComm& lc) {
  for (;;) {
    PendingStream ps;
    ps.from.len = sizeof(ps.from.storage);
    int fd = accept4(lc.fd.get(), ps.from.sa(), &ps.from.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ps.fd = ForkClosedFd(fd);
    setStreamOptions(fd);
    lc.pending.push_back(std::move(ps));
  }
}

}  // namespace

StreamShape streamShapeFor(const std::string& pciVendor, int64_t threadsKnob, int64_t socksKnob) {
  constexpr int64_t kAuto = -2;
  int64_t autoThreads = 0, autoSocks = 1;
  if (pciVendor == "0x1d0f") {  // AWS ENA/EFA
    autoThreads = 2;
    autoSocks = 8;
  } else if (pciVendor == "0x1ae0") {  // Google gVNIC
    autoThreads = 4;
  }
  int64_t t = threadsKnob == kAuto ? autoThreads : threadsKnob;
  int64_t s = socksKnob == kAuto ? autoSocks : socksKnob;
  t = std::clamp<int64_t>(t, 0, kMaxStreams);
  s = std::max<int64_t>(s, 1);
  if (t > 0 && t * s > kMaxStreams) s = kMaxStreams / t;
  return {static_cast<uint32_t>(t), static_cast<uint32_t>(s)};
}

ncclResult_t currentDevices(std::shared_ptr<const std::vector<Device>>* out) {
  DeviceCache& c = deviceCache();
  const std::string spec = params::socketIfname();
  const int family = familyFromEnv();
  const std::string key = spec + "|" + std::to_string(family);
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.list || c.key != key) {
    std::vector<InterfaceInfo> ifs;
    CHORUS_CHECK(chooseInterfaces(spec, family, "net/socket", &ifs));
    auto list = std::make_shared<std::vector<Device>>();
    for (const InterfaceInfo& i : ifs)
      list->push_back({i.name, i.addr, readPciPath(i.name), readSpeedMbps(i.name),
                       topo::detail::readFirstLine("/sys/class/net/" + i.name + "/device/vendor")});
    if (c.list) c.retired.push_back(c.list);
    c.list = list;
    c.key = key;
  }
  *out = c.list;
  return ncclSuccess;
}

ncclResult_t listenOn(int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  std::shared_ptr<const std::vector<Device>> devs;
  CHORUS_CHECK(currentDevices(&devs));
  if (dev < 0 || dev >= static_cast<int>(devs->size()))
    return fail(ncclInvalidArgument, "socket: listen on device %d, but there are %zu devices", dev, devs->size());
  auto lc = std::make_unique<ListenComm>();
  CHORUS_CHECK(listenSocket((*devs)[dev].addr, &lc->fd, &lc->bound));
  lc->nonce = random64();
  Handle h{};
  h.magic = kHandleMagic;
  h.family = static_cast<uint16_t>(lc->bound.family());
  h.port = lc->bound.port();
  h.nonce = lc->nonce;
  h.processToken = processToken();
  if (h.family == AF_INET) {
    memcpy(h.addr, &reinterpret_cast<const sockaddr_in*>(&lc->bound.storage)->sin_addr, 4);
  } else {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&lc->bound.storage);
    memcpy(h.addr, &a6->sin6_addr, 16);
    h.scopeId = a6->sin6_scope_id;
  }
  memset(handle, 0, CHORUS_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof(h));
  CHORUS_TRACE(kLogNet, "socket: listening on %s (%s)", lc->bound.str().c_str(), (*devs)[dev].name.c_str());
  *listenComm = lc.release();
  return ncclSuccess;
}

ncclResult_t connectTo(int dev, const void* handle, void** sendComm) {
  *sendComm = nullptr;
  SockAddr addr;
  uint64_t nonce = 0, peerToken = 0;
  CHORUS_CHECK(decodeHandle(handle, &addr, &nonce, &peerToken));
  std::shared_ptr<const std::vector<Device>> devs;
  CHORUS_CHECK(currentDevices(&devs));
  if (dev < 0 || dev >= static_cast<int>(devs->size()))
    return fail(ncclInvalidArgument, "socket: connect from device %d, but there are %zu devices", dev, devs->size());
  const StreamShape shape = streamShapeFor((*devs)[dev].pciVendor, params::socketNThreads(), params::nsocksPerThread());
  const uint32_t nthreads = shape.nthreads, nsocks = shape.nsocks;
  const uint32_t ndata = nthreads == 0 ? 0 : nthreads * nsocks;
  const uint64_t connId = random64();
  const auto deadline = deadlineAfterMs(kNetSetupBoundMs);
  auto ctrl = std::make_shared<ForkClosedFd>();
  std::vector<ForkClosedFd> data(ndata);
  for (uint32_t s = 0; s <= ndata; ++s) {
    ForkClosedFd& fd = s == 0 ? *ctrl : data[s - 1];
    int err = connectBounded(addr, deadline, &fd);
    if (err == 0 && s == 0) registerConnected(connId, ctrl);  // before the peer can accept it (socket_pairing.h)
    StreamHello hello{kHelloMagic, s, nthreads, nsocks, nonce, connId, processToken()};
    if (err == 0) err = writeAll(fd.get(), reinterpret_cast<const uint8_t*>(&hello), sizeof(hello), deadline);
    if (err != 0) {
      forgetConnected(connId);
      return fail(ncclRemoteError, "socket: cannot %s stream %u to %s (device %d): %s", fd.valid() ? "open" : "connect",
                  s, addr.str().c_str(), dev, strerror(err));
    }
  }
  CHORUS_TRACE(kLogNet, "socket: connected to %s with %u data streams (%u threads x %u)", addr.str().c_str(), ndata,
               nthreads, nsocks);
  *sendComm = new SocketComm(true, std::move(ctrl), std::move(data), nthreads, nsocks, addr.str(), {connId, peerToken});
  return ncclSuccess;
}

ncclResult_t acceptFrom(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto& lc = *static_cast<ListenComm*>(listenComm);
  if (lc.handedOut)
    return fail(ncclInvalidUsage, "socket: accept called again on %s after a connection was accepted",
                lc.bound.str().c_str());
  acceptQueued(lc);
  for (size_t i = 0; i < lc.pending.size();) {
    if (advancePending(lc, lc.pending[i])) {
      ++i;
    } else {
      lc.pending.erase(lc.pending.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  if (!lc.ctrl.valid() || lc.dataIn != lc.data.size()) return ncclSuccess;
  lc.handedOut = true;
  *recvComm = new SocketComm(false, std::make_shared<ForkClosedFd>(std::move(lc.ctrl)), std::move(lc.data), lc.nthreads,
                             lc.nsocks, lc.peer.str(), {lc.connId, lc.peerToken});
  return ncclSuccess;
}

void closeListener(void* listenComm) { delete static_cast<ListenComm*>(listenComm); }

}  // namespace chorus::sock
