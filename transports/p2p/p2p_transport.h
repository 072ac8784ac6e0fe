#pragma once

#include "transport/transport.h"

namespace chorus {

// GPU ranks of one host that may reach each other's memory (same GPU, or
// peer access allowed by NCCL_P2P_DISABLE / NCCL_P2P_LEVEL): the FIFO lives
// in device memory of the receiving rank's GPU; a sender in the same process
// uses the pointer, one in another process opens it through CUDA IPC.
// CUDA builds only (p2p_transport.cc); the decision itself is p2p_policy.h.
class P2pTransport final : public Transport {
 public:
  const char* name() const override { return "p2p"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override;
  ncclResult_t createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                          std::vector<uint8_t>* handle) override;
  ncclResult_t connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                           FifoEnd* end) override;
};

}  // namespace chorus
