#pragma once

#include "transport/transport.h"

namespace chorus {

// Ranks that are threads of the same process: FIFOs live on the heap.
class InprocTransport final : public Transport {
 public:
  const char* name() const override { return "inproc"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override;
  ncclResult_t createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                          std::vector<uint8_t>* handle) override;
  ncclResult_t connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                           FifoEnd* end) override;
};

}  // namespace chorus
