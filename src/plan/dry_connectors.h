// A ConnectorSource that creates no FIFOs: it hands out connectors over
// empty FIFO ends and remembers each one's key, so a plan can be built and
// printed (chorus-topo --plan) without peers. Such a plan must never run.
#pragma once

#include <deque>
#include <map>
#include <memory>

#include "transport/connector_source.h"

namespace chorus {

class DryConnectors final : public ConnectorSource {
 public:
  struct Info {
    ConnKey key;
    bool send = false;
    uint32_t slotBytes = 0;
    uint32_t nslots = 0;
  };
  ncclResult_t requestRecv(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, RecvConnector** out) override;
  ncclResult_t requestSend(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, SendConnector** out) override;
  // What a connector handed out by this source connects; null for others.
  const Info* info(const void* connector) const;

 private:
  static FifoEnd emptyEnd(const ConnKey& key, uint32_t slotBytes, uint32_t nslots);
  std::map<ConnKey, RecvConnector*> recvs_;
  std::map<ConnKey, SendConnector*> sends_;
  std::deque<std::unique_ptr<RecvConnector>> recvStore_;
  std::deque<std::unique_ptr<SendConnector>> sendStore_;
  std::map<const void*, Info> info_;
};

}  // namespace chorus
