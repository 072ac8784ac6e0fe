#pragma once

#include "transport/transport.h"

namespace chorus {

// Ranks on different hosts (and, with NCCL_SHM_DISABLE=1, different processes
// of one host): FIFOs on each side's heap, moved by the network proxy through
// the chosen backend (transports/net/net_backends.h).
class NetTransport final : public Transport {
 public:
  const char* name() const override { return "net"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override;
  ncclResult_t createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                          std::vector<uint8_t>* handle) override;
  ncclResult_t connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                           FifoEnd* end) override;
  // Waits until the proxy closed the links whose ends were dropped.
  bool awaitRetired(std::chrono::milliseconds bound) override;
};

}  // namespace chorus
