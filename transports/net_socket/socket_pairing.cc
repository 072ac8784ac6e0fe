#include "transports/net_socket/socket_pairing.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <utility>

#include "core/host_identity.h"

namespace chorus::sock {
namespace {

struct Accepted {
  uint64_t peerToken = 0;
  std::weak_ptr<ForkClosedFd> ctrl;
  bool claimed = false;
};

// A connection this process connected: the live comm's socket, or once the
// comm is closed the socket itself, kept until the peer closes its end (the
// peer may have moved a direction onto it just before it saw the close, and
// the receiver of that direction must still find it).
struct Connected {
  std::weak_ptr<ForkClosedFd> live;
  SharedFd retired;
};

struct Registry {
  std::mutex mu;
  std::map<uint64_t, Connected> connected;  // by connection id
  std::map<uint64_t, Accepted> accepted;    // by connection id
  std::atomic<uint64_t> generation{0};
};

// Whether the peer closed its end of a retired socket (end of stream or an
// error); bytes waiting (a moved direction nobody followed yet) keep it.
bool peerClosed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char byte = 0;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// Drops retired sockets whose peer has closed its end. Under r.mu.
void sweepRetired(Registry& r) {
  for (auto it = r.connected.begin(); it != r.connected.end();) {
    if (it->second.retired && peerClosed(it->second.retired->get()))
      it = r.connected.erase(it);
    else
      ++it;
  }
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: comms may close during exit
  return *r;
}

}  // namespace

void registerConnected(uint64_t connId, const SharedFd& ctrl) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  sweepRetired(r);
  r.connected[connId] = Connected{ctrl, nullptr};
}

void retireConnected(uint64_t connId, const SharedFd& ctrl) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.connected.find(connId);
  if (it == r.connected.end()) return;
  if (ctrl && ctrl->valid() && !peerClosed(ctrl->get()))
    it->second = Connected{{}, ctrl};
  else
    r.connected.erase(it);
}

void forgetConnected(uint64_t connId) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.connected.erase(connId);
}

void registerAccepted(uint64_t connId, uint64_t peerToken, const SharedFd& ctrl) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.accepted[connId] = Accepted{peerToken, ctrl, false};
  }
  r.generation.fetch_add(1, std::memory_order_release);
}

void unregisterAccepted(uint64_t connId) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.accepted.erase(connId);
}

SharedFd connectedSocket(uint64_t connId) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.connected.find(connId);
  if (it == r.connected.end()) return nullptr;
  if (!it->second.retired) return it->second.live.lock();
  SharedFd fd = std::move(it->second.retired);  // the follower keeps it from now on
  r.connected.erase(it);
  return fd;
}

SharedFd claimReverse(const ConnIdentity& me, uint64_t* targetId) {
  const uint64_t mine = processToken();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& [id, a] : r.accepted) {
    if (a.claimed || a.peerToken != me.peerToken || id == me.connId) continue;
    // The smaller (token, id) side moves, so the peer never moves onto ours.
    if (std::pair{mine, me.connId} >= std::pair{a.peerToken, id}) continue;
    SharedFd fd = a.ctrl.lock();
    if (!fd) continue;
    a.claimed = true;
    *targetId = id;
    return fd;
  }
  return nullptr;
}

bool mayEverMove(const ConnIdentity& send) { return processToken() <= send.peerToken; }

uint64_t acceptedGeneration() { return registry().generation.load(std::memory_order_acquire); }

}  // namespace chorus::sock
