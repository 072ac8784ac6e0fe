#include "transports/net_socket/socket_pairing.h"

#include <atomic>
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

struct Registry {
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<ForkClosedFd>> connected;  // by connection id
  std::map<uint64_t, Accepted> accepted;                      // by connection id
  std::atomic<uint64_t> generation{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: comms may close during exit
  return *r;
}

}  // namespace

void registerConnected(uint64_t connId, const SharedFd& ctrl) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.connected[connId] = ctrl;
}

void unregisterConnected(uint64_t connId) {
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
  return it == r.connected.end() ? nullptr : it->second.lock();
}

SharedFd claimReverse(const SendIdentity& me, uint64_t* targetId) {
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

uint64_t acceptedGeneration() { return registry().generation.load(std::memory_order_acquire); }

}  // namespace chorus::sock
