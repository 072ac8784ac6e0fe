// Where a plan builder gets its connectors. The communicator's connection
// table creates real FIFOs (lazily, announcing receivers through the
// bootstrap); chorus-topo --plan uses a dry source that only records which
// connectors a plan would use. A connector is identified by its key.
#pragma once

#include <compare>
#include <cstdint>

#include "nccl.h"
#include "transport/fifo.h"

namespace chorus {

// Connectors are separate per use so that two independent progress lanes
// never share a FIFO (their slot sequences would interleave).
enum class ConnClass : uint8_t { Ring = 0, TreeUp = 1, TreeDown = 2, P2P = 3, Direct = 4 };

const char* connClassName(ConnClass c);

struct ConnKey {
  ConnClass cls;
  uint8_t proto;
  uint16_t channel;
  int peer;
  auto operator<=>(const ConnKey&) const = default;
};

class ConnectorSource {
 public:
  virtual ~ConnectorSource() = default;
  virtual ncclResult_t requestRecv(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, RecvConnector** out) = 0;
  virtual ncclResult_t requestSend(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, SendConnector** out) = 0;
};

}  // namespace chorus
