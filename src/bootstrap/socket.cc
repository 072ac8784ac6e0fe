#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "core/params.h"
#include "core/result.h"

namespace chorus {

// ---- Addresses ----------------------------------------------------------------

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  return false;
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

namespace {

bool parsePort(const std::string& s, uint16_t* port) {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace

ncclResult_t parseHostPort(const std::string& text, SockAddr* out) {
  std::string host, portStr;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(ncclInvalidArgument, "bootstrap: cannot parse address '%s' (expected [v6addr]:port)", text.c_str());
    host = text.substr(1, close - 1);
    portStr = text.substr(close + 2);
  } else {
    // Without brackets the last colon separates the port, so bare IPv6 works too.
    size_t colon = text.rfind(':');
    if (colon == std::string::npos)
      return fail(ncclInvalidArgument, "bootstrap: cannot parse address '%s' (expected host:port)", text.c_str());
    host = text.substr(0, colon);
    portStr = text.substr(colon + 1);
  }
  uint16_t port = 0;
  if (host.empty() || !parsePort(portStr, &port))
    return fail(ncclInvalidArgument, "bootstrap: cannot parse address '%s' (expected host:port)", text.c_str());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0)
    return fail(ncclInvalidArgument, "bootstrap: cannot resolve '%s': %s", host.c_str(), gai_strerror(rc));
  const addrinfo* pick = nullptr;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
    if (ai->ai_family == AF_INET6 && pick == nullptr) pick = ai;
  }
  if (pick == nullptr) {
    freeaddrinfo(res);
    return fail(ncclInvalidArgument, "bootstrap: '%s' has no IPv4 or IPv6 address", host.c_str());
  }
  *out = SockAddr{};
  memcpy(&out->storage, pick->ai_addr, pick->ai_addrlen);
  out->len = pick->ai_addrlen;
  out->setPort(port);
  freeaddrinfo(res);
  return ncclSuccess;
}

// ---- Interface selection ----------------------------------------------------------

IfnameFilter IfnameFilter::parse(const std::string& spec) {
  IfnameFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') {
    f.exclude = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '=') {
    f.exact = true;
    ++pos;
  }
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) f.items.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return f;
}

bool IfnameFilter::matches(const std::string& name) const {
  bool listed = false;
  for (const auto& it : items) {
    if (exact ? name == it : name.compare(0, it.size(), it) == 0) {
      listed = true;
      break;
    }
  }
  return exclude ? !listed : listed;
}

namespace {

struct IfCandidate {
  std::string name;
  bool up = false;
  bool loopback = false;
  SockAddr v4, v6;
  bool hasV4 = false, hasV6 = false;
};

std::vector<IfCandidate> listInterfaces(ncclResult_t* res) {
  std::vector<IfCandidate> out;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) {
    *res = fail(ncclSystemError, "bootstrap: getifaddrs failed: %s", strerror(errno));
    return out;
  }
  for (ifaddrs* ifa = ifs; ifa != nullptr; ifa = ifa->ifa_next) {
    IfCandidate* c = nullptr;
    for (auto& e : out)
      if (e.name == ifa->ifa_name) c = &e;
    if (c == nullptr) {
      out.push_back(IfCandidate{});
      c = &out.back();
      c->name = ifa->ifa_name;
    }
    c->up = c->up || (ifa->ifa_flags & IFF_UP) != 0;
    c->loopback = c->loopback || (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (ifa->ifa_addr == nullptr) continue;
    if (ifa->ifa_addr->sa_family == AF_INET && !c->hasV4) {
      memcpy(&c->v4.storage, ifa->ifa_addr, sizeof(sockaddr_in));
      c->v4.len = sizeof(sockaddr_in);
      c->hasV4 = true;
    } else if (ifa->ifa_addr->sa_family == AF_INET6 && !c->hasV6) {
      // Link-local addresses only mean something together with our scope id,
      // which a peer on another host cannot use.
      auto* a6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
      memcpy(&c->v6.storage, ifa->ifa_addr, sizeof(sockaddr_in6));
      c->v6.len = sizeof(sockaddr_in6);
      c->hasV6 = true;
    }
  }
  freeifaddrs(ifs);
  *res = ncclSuccess;
  return out;
}

// Why an interface cannot serve, or nullptr if it can.
const char* rejection(const IfCandidate& c, const std::string& spec, const IfnameFilter& filter) {
  if (!spec.empty() && !filter.matches(c.name)) return "not selected by NCCL_SOCKET_IFNAME";
  if (spec.empty() && c.name.compare(0, 6, "docker") == 0) return "docker bridge (skipped by default)";
  if (!c.up) return "down";
  if (!c.hasV4 && !c.hasV6) return "no usable IPv4/IPv6 address";
  return nullptr;
}

}  // namespace

ncclResult_t chooseInterface(const std::string& spec, InterfaceInfo* out) {
  ncclResult_t res = ncclSuccess;
  std::vector<IfCandidate> ifs = listInterfaces(&res);
  CHORUS_CHECK(res);
  IfnameFilter filter = IfnameFilter::parse(spec);
  std::vector<const char*> why(ifs.size());
  const IfCandidate* pick = nullptr;
  const IfCandidate* loopback = nullptr;
  for (size_t i = 0; i < ifs.size(); ++i) {
    why[i] = rejection(ifs[i], spec, filter);
    if (why[i] == nullptr && ifs[i].loopback) {
      if (loopback == nullptr) loopback = &ifs[i];
      why[i] = "loopback (used only when nothing else is available)";
    }
    if (why[i] == nullptr && pick == nullptr) pick = &ifs[i];
  }
  const char* reason = "first up non-loopback interface";
  if (pick == nullptr) {
    pick = loopback;
    reason = "no other interface is usable, falling back to loopback";
  }
  std::string passed;
  for (size_t i = 0; i < ifs.size(); ++i) {
    if (&ifs[i] == pick || why[i] == nullptr) continue;
    passed += (passed.empty() ? "" : "; ") + ifs[i].name + ": " + why[i];
  }
  if (pick == nullptr)
    return fail(ncclSystemError, "bootstrap: no usable network interface for NCCL_SOCKET_IFNAME='%s' (%s)",
                spec.c_str(), passed.c_str());
  out->name = pick->name;
  out->addr = pick->hasV4 ? pick->v4 : pick->v6;
  out->addr.setPort(0);
  std::string within = spec.empty() ? "" : " within NCCL_SOCKET_IFNAME=" + spec;
  CHORUS_INFO(kLogInit | kLogBootstrap, "bootstrap: store server uses interface %s (%s): %s%s; passed over: %s",
              out->name.c_str(), out->addr.str().c_str(), reason, within.c_str(),
              passed.empty() ? "none" : passed.c_str());
  return ncclSuccess;
}

namespace {

// The address of `c` to use for `family`, or nullptr (and *why) when it has none.
const SockAddr* addressFor(const IfCandidate& c, int family, const char** why) {
  if (family == AF_INET) {
    *why = "no IPv4 address (NCCL_SOCKET_FAMILY=AF_INET)";
    return c.hasV4 ? &c.v4 : nullptr;
  }
  if (family == AF_INET6) {
    *why = "no global IPv6 address (NCCL_SOCKET_FAMILY=AF_INET6)";
    return c.hasV6 ? &c.v6 : nullptr;
  }
  *why = "no usable IPv4/IPv6 address";
  return c.hasV4 ? &c.v4 : (c.hasV6 ? &c.v6 : nullptr);
}

}  // namespace

ncclResult_t chooseInterfaces(const std::string& spec, int family, const char* who, std::vector<InterfaceInfo>* out) {
  ncclResult_t res = ncclSuccess;
  std::vector<IfCandidate> ifs = listInterfaces(&res);
  CHORUS_CHECK(res);
  IfnameFilter filter = IfnameFilter::parse(spec);
  std::vector<InterfaceInfo> picked, loopbacks;
  std::string rejected;
  for (const IfCandidate& c : ifs) {
    const char* why = rejection(c, spec, filter);
    const SockAddr* addr = why == nullptr ? addressFor(c, family, &why) : nullptr;
    if (addr == nullptr) {
      rejected += (rejected.empty() ? "" : "; ") + c.name + ": " + why;
      continue;
    }
    InterfaceInfo info{c.name, *addr};
    info.addr.setPort(0);
    (c.loopback ? loopbacks : picked).push_back(info);
  }
  const char* reason = "up, allowed by the filter";
  if (picked.empty()) {
    picked = loopbacks;
    reason = "no other interface is usable, falling back to loopback";
  } else {
    for (const InterfaceInfo& l : loopbacks)
      rejected += (rejected.empty() ? "" : "; ") + l.name + ": loopback (other interfaces exist)";
  }
  if (picked.empty())
    return fail(ncclSystemError, "%s: no usable network interface for NCCL_SOCKET_IFNAME='%s' (%s)", who, spec.c_str(),
                rejected.c_str());
  std::string used;
  for (const InterfaceInfo& i : picked) used += (used.empty() ? "" : ", ") + i.name + " (" + i.addr.str() + ")";
  CHORUS_INFO(kLogInit | kLogNet, "%s: using %s: %s%s; rejected: %s", who, used.c_str(), reason,
              spec.empty() ? "" : (" within NCCL_SOCKET_IFNAME=" + spec).c_str(),
              rejected.empty() ? "none" : rejected.c_str());
  *out = std::move(picked);
  return ncclSuccess;
}

// ---- Descriptors closed in forked children ---------------------------------------------

namespace {

struct ForkFdRegistry {
  std::mutex mu;
  std::set<int> fds;
};

ForkFdRegistry& forkRegistry() {
  // Never destroyed: server threads may still close descriptors during exit.
  static ForkFdRegistry* reg = [] {
    auto* r = new ForkFdRegistry;
    pthread_atfork([] { forkRegistry().mu.lock(); }, [] { forkRegistry().mu.unlock(); },
                   [] {
                     ForkFdRegistry& g = forkRegistry();
                     for (int fd : g.fds) close(fd);
                     g.fds.clear();
                     g.mu.unlock();
                   });
    return r;
  }();
  return *reg;
}

}  // namespace

ForkClosedFd::ForkClosedFd(int fd) : fd_(fd), pid_(getpid()) {
  if (fd_ < 0) return;
  ForkFdRegistry& reg = forkRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.fds.insert(fd_);
}

ForkClosedFd::ForkClosedFd(ForkClosedFd&& o) noexcept : fd_(o.fd_), pid_(o.pid_) { o.fd_ = -1; }

ForkClosedFd& ForkClosedFd::operator=(ForkClosedFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.fd_;
    pid_ = o.pid_;
    o.fd_ = -1;
  }
  return *this;
}

void ForkClosedFd::reset() {
  if (fd_ < 0) return;
  // In a forked child the descriptor was already closed by the atfork handler
  // and its number may have been reused: leave it alone.
  if (getpid() == pid_) {
    ForkFdRegistry& reg = forkRegistry();
    std::lock_guard<std::mutex> lock(reg.mu);
    reg.fds.erase(fd_);
    close(fd_);
  }
  fd_ = -1;
}

// ---- Sockets --------------------------------------------------------------------------

namespace {

// Keepalive probes on an idle stream: the first after this long, then this
// often; TCP_USER_TIMEOUT (CHORUS_TCP_DEAD_PEER_MS) decides when unanswered
// probes or unacknowledged data end the connection.
constexpr int kKeepaliveIdleS = 1;
constexpr int kKeepaliveIntervalS = 1;

void setIntOption(int fd, int level, int name, int value) { setsockopt(fd, level, name, &value, sizeof(value)); }

}  // namespace

void setStreamOptions(int fd) {
  setIntOption(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  const int64_t deadMs = params::tcpDeadPeerMs();
  if (deadMs <= 0) return;
  const int userTimeoutMs = static_cast<int>(std::min<int64_t>(deadMs, INT32_MAX));
  setIntOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  setIntOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, kKeepaliveIdleS);
  setIntOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, kKeepaliveIntervalS);
  // Enough probes to outlast the user timeout, which then ends the connection.
  setIntOption(fd, IPPROTO_TCP, TCP_KEEPCNT, std::max(1, userTimeoutMs / 1000 / kKeepaliveIntervalS + 1));
  setIntOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, userTimeoutMs);
}

ncclResult_t listenSocket(const SockAddr& addr, ForkClosedFd* fd, SockAddr* bound) {
  ForkClosedFd s(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return fail(ncclSystemError, "bootstrap: socket() failed: %s", strerror(errno));
  int one = 1;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(s.get(), addr.sa(), addr.len) != 0)
    return fail(ncclSystemError, "bootstrap: cannot listen on %s: bind failed: %s", addr.str().c_str(), strerror(errno));
  if (listen(s.get(), SOMAXCONN) != 0)
    return fail(ncclSystemError, "bootstrap: listen on %s failed: %s", addr.str().c_str(), strerror(errno));
  *bound = SockAddr{};
  bound->len = sizeof(bound->storage);
  if (getsockname(s.get(), bound->sa(), &bound->len) != 0)
    return fail(ncclSystemError, "bootstrap: getsockname failed: %s", strerror(errno));
  *fd = std::move(s);
  return ncclSuccess;
}

namespace {

// Poll timeout for the next slice: at most kWaitSlice, at least 1 ms.
int sliceMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count() + 1;
  if (left > kWaitSlice.count()) return static_cast<int>(kWaitSlice.count());
  return left < 1 ? 1 : static_cast<int>(left);
}

}  // namespace

int connectOnce(const SockAddr& addr, const WaitBound& bound, ForkClosedFd* fd) {
  ForkClosedFd s(socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  if (connect(s.get(), addr.sa(), addr.len) != 0) {
    if (errno != EINPROGRESS) return errno;
    while (true) {
      if (waitAborted(bound)) return ECANCELED;
      if (Clock::now() >= bound.deadline) return ETIMEDOUT;
      pollfd p{s.get(), POLLOUT, 0};
      int n = poll(&p, 1, sliceMs(bound.deadline));
      if (n < 0 && errno != EINTR) return errno;
      if (n > 0) break;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    if (err != 0) return err;
  }
  setStreamOptions(s.get());
  *fd = std::move(s);
  return 0;
}

bool connectRetryable(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ECONNABORTED || err == EAGAIN || err == ENETUNREACH ||
         err == EHOSTUNREACH || err == EINTR;
}

int writeAll(int fd, const uint8_t* buf, size_t n, Clock::time_point deadline) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = send(fd, buf + done, n - done, MSG_NOSIGNAL);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    if (Clock::now() >= deadline) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, sliceMs(deadline));
  }
  return 0;
}

}  // namespace chorus
