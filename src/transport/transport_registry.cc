#include <algorithm>

#include "transport/transport.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/net/net_transport.h"
#include "transports/shm/shm_transport.h"

namespace chorus {

const std::vector<Transport*>& transportRegistry() {
  static InprocTransport inproc;
  static ShmTransport shm;
  static NetTransport net;
  static const std::vector<Transport*> table = {&inproc, &shm, &net};
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

Transport* selectTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : transportRegistry())
    if (t->canConnect(self, peer)) return t;
  return nullptr;
}

}  // namespace chorus
