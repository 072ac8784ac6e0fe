// The one transport interface. A transport only decides, at connection time,
// where a connector's FIFO memory lives and how the other side reaches it;
// after that every connector is used the same way (transport/fifo.h).
//
// Connection protocol (see connection_table.cc): the receiving rank calls
// createRecv, which allocates the FIFO and returns an opaque handle; the handle
// travels to the sending rank through the bootstrap; the sender calls
// connectSend with it. Creation never waits for the peer, which is what makes
// lazy connection inside a collective deadlock-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "topo/nic_routes.h"
#include "transport/fifo.h"

namespace chorus {

// What a rank tells every other rank about itself at init.
struct PeerInfo {
  int rank = -1;
  int pid = 0;
  uint64_t hostHash = 0;
  uint64_t machineHash = 0;   // host_identity.h: ranks with equal values share CPUs
  uint64_t processToken = 0;  // distinguishes processes with equal pid (e.g. across containers)
  int cudaDev = -1;           // in this rank's own device numbering (CUDA_VISIBLE_DEVICES may differ between processes)
  int hostMode = 1;
  char busId[16] = {};  // GPU mode: the PCI bus id of the rank's GPU ("0000:3b:00.0"), comparable across processes
  // GPU mode: a hash of the bus ids of every GPU the rank's process sees
  // (CUDA_VISIBLE_DEVICES). Each rank of a pair picks its transport alone,
  // so a choice that depends on what a process sees must agree on both.
  uint64_t visibleGpus = 0;
};

// Whether two ranks of the same host use the same GPU (by PCI bus id when
// both know it, else by device number).
bool sameGpu(const PeerInfo& a, const PeerInfo& b);

struct ConnRequest {
  int selfRank = -1;
  int peerRank = -1;
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  int channel = 0;  // the connector's channel; the net transport spreads channels over NICs
  // GPU mode: CUDA kernels, not host threads, use the connector, so its FIFO
  // must be reachable from `selfDevice` (device memory, or host memory that is
  // pinned and mapped); FifoEnd's pointers are then the addresses kernels use.
  bool deviceMemory = false;
  int selfDevice = -1;
  std::string label;        // for messages: "comm 0x.. ring ch0 1->2"
  int64_t waitLimitMs = 0;  // the communicator's CHORUS_TIMEOUT_MS (core/wait_limit.h): 0 = no limit
  std::string netName;      // ncclConfig_t.netName: the network backend to use ("": NCCL_NET, else preference)
  // GPU mode: how far this rank's GPU is from each NIC (the network
  // transport's GPUDirect choice); null when the topology does not say.
  std::shared_ptr<const topo::GpuNicRoutes> nicRoutes;
  // More ranks on this machine than CPUs: the connector's executor is often
  // off its core, so whatever moves the connector must not count on it.
  bool coresShared = false;
};

// A sender's check of the receiver's FIFO geometry (`peerSlotBytes` x
// `peerNslots`) against its own request: ncclInvalidUsage, naming the
// settings that must agree, when they differ.
ncclResult_t checkPeerSlots(const char* transport, const ConnRequest& req, uint32_t peerSlotBytes, uint32_t peerNslots);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  virtual ncclResult_t createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                                  std::vector<uint8_t>* handle) = 0;
  virtual ncclResult_t connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                                   FifoEnd* end) = 0;
  // Waits, at most `bound`, until the connections whose ends were dropped so
  // far released their resources (the net proxy closes its links in the
  // background). False if some did not in time.
  virtual bool awaitRetired(std::chrono::milliseconds bound) {
    (void)bound;
    return true;
  }
};

// Built-in transports in order of preference. Adding one: implement the class
// in transports/<name>/ and add one line to transport_registry.cc.
const std::vector<Transport*>& transportRegistry();
// First transport that can connect self to peer; nullptr if none.
Transport* selectTransport(const PeerInfo& self, const PeerInfo& peer);
// awaitRetired on every transport, sharing one bound (communicator destroy).
bool awaitRetiredConnections(std::chrono::milliseconds bound);

}  // namespace chorus
