// Socket plumbing for the bootstrap: addresses (IPv4/IPv6), choosing the
// interface the store server listens on, and connect/write loops that honour a
// WaitBound. Sockets are non-blocking and close-on-exec; every socket a store
// owns is also closed in fork()ed children (see ForkClosedFd) so that a child
// cannot keep a dead parent's server looking alive to its clients.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "bootstrap/store.h"

namespace chorus {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  int family() const { return storage.ss_family; }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  // "10.1.2.3:4000" or "[fe80::1]:4000".
  std::string str() const;
};

// Parses "host:port", "[v6addr]:port" or "v6addr" forms with a port; host may
// be a name (resolved with getaddrinfo, IPv4 preferred).
ncclResult_t parseHostPort(const std::string& text, SockAddr* out);

// NCCL_SOCKET_IFNAME semantics: a comma list of name prefixes; a leading '^'
// turns the list into exclusions, a leading '=' (after any '^') requires exact names.
struct IfnameFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> items;
  static IfnameFilter parse(const std::string& spec);
  bool matches(const std::string& name) const;
};

struct InterfaceInfo {
  std::string name;
  SockAddr addr;  // port 0
};
// Picks the interface the store server listens on: an up interface allowed by
// `spec` (empty: anything but docker bridges), non-loopback preferred, loopback
// as the fallback. Logs the choice and the reasons others were passed over.
ncclResult_t chooseInterface(const std::string& spec, InterfaceInfo* out);
// Every interface allowed by `spec` (same rules) that has an address of
// `family` (AF_INET, AF_INET6, or AF_UNSPEC: either, IPv4 preferred).
// Loopback is returned only when nothing else qualifies. Logs (as `who`) the
// interfaces used and why each other one was rejected; fails when none is left.
ncclResult_t chooseInterfaces(const std::string& spec, int family, const char* who, std::vector<InterfaceInfo>* out);

// An owned socket descriptor. Descriptors are registered so that a fork()ed
// child closes them (they belong to threads the child does not have), and a
// copy destroyed in a child never closes a number the child reused.
class ForkClosedFd {
 public:
  ForkClosedFd() = default;
  explicit ForkClosedFd(int fd);
  ~ForkClosedFd() { reset(); }
  ForkClosedFd(ForkClosedFd&& o) noexcept;
  ForkClosedFd& operator=(ForkClosedFd&& o) noexcept;
  ForkClosedFd(const ForkClosedFd&) = delete;
  ForkClosedFd& operator=(const ForkClosedFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
  pid_t pid_ = 0;
};

// Bound listening socket (non-blocking). addr's port 0 picks an ephemeral port;
// *bound receives the address actually bound.
ncclResult_t listenSocket(const SockAddr& addr, ForkClosedFd* fd, SockAddr* bound);

// One non-blocking connect attempt, waited for in slices. Returns 0 on success,
// else the errno that ended it (ETIMEDOUT when the bound ran out, ECANCELED on abort).
int connectOnce(const SockAddr& addr, const WaitBound& bound, ForkClosedFd* fd);
// Whether a connect error means "nobody listens yet": worth retrying.
bool connectRetryable(int err);

// Writes all of buf to a non-blocking socket, polling in slices. Returns 0 or
// an errno (ETIMEDOUT at the deadline).
int writeAll(int fd, const uint8_t* buf, size_t n, Clock::time_point deadline);

// Options of every TCP stream the library opens: TCP_NODELAY, and keepalive
// plus TCP_USER_TIMEOUT so a peer host that vanished (power loss, cable,
// partition) fails the connection after CHORUS_TCP_DEAD_PEER_MS, while a
// stopped process, whose kernel still acknowledges, does not.
void setStreamOptions(int fd);

}  // namespace chorus
