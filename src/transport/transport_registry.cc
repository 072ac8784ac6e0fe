#include <algorithm>
#include <cstring>

#include "transport/transport.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/net/net_transport.h"
#include "transports/shm/shm_transport.h"
#if CHORUS_HAVE_CUDA
#include "transports/p2p/p2p_transport.h"
#endif

namespace chorus {

const std::vector<Transport*>& transportRegistry() {
  static InprocTransport inproc;
  static ShmTransport shm;
  static NetTransport net;
#if CHORUS_HAVE_CUDA
  // First: GPU ranks of one host that may reach each other's memory use it;
  // it declines host-mode ranks, which keep inproc / shm / net.
  static P2pTransport p2p;
  static const std::vector<Transport*> table = {&p2p, &inproc, &shm, &net};
#else
  static const std::vector<Transport*> table = {&inproc, &shm, &net};
#endif
  return table;
}

bool awaitRetiredConnections(std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  bool all = true;
  for (Transport* t : transportRegistry()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    all = t->awaitRetired(std::max(left, std::chrono::milliseconds(0))) && all;
  }
  return all;
}

bool sameGpu(const PeerInfo& a, const PeerInfo& b) {
  if (a.hostHash != b.hostHash || a.cudaDev < 0 || b.cudaDev < 0) return false;
  if (a.busId[0] != '\0' && b.busId[0] != '\0') return std::strncmp(a.busId, b.busId, sizeof(a.busId)) == 0;
  return a.cudaDev == b.cudaDev;
}

Transport* selectTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : transportRegistry())
    if (t->canConnect(self, peer)) return t;
  return nullptr;
}

}  // namespace chorus
