#include "transport/transport.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"

namespace chorus {

const std::vector<Transport*>& transportRegistry() {
  static InprocTransport inproc;
  static ShmTransport shm;
  static const std::vector<Transport*> table = {&inproc, &shm};
  return table;
}

Transport* selectTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : transportRegistry())
    if (t->canConnect(self, peer)) return t;
  return nullptr;
}

}  // namespace chorus
