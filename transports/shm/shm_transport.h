#pragma once

#include "transport/transport.h"

namespace chorus {

// Processes on the same host: FIFOs live in POSIX shared memory segments.
class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override;
  ncclResult_t createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                          std::vector<uint8_t>* handle) override;
  ncclResult_t connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                           FifoEnd* end) override;
};

}  // namespace chorus
