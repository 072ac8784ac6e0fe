// Network transport. Each side keeps its own FIFO in its heap; the proxy
// thread copies slots between the two through the backend:
//   receiver: createRecv allocates the FIFO and listens on device
//             channel % ndev; the handle (a small header + the backend's
//             handle) goes to the sender through the bootstrap; the proxy
//             accepts asynchronously and keeps receives posted in free slots.
//   sender:   connectSend connects (bounded by CHORUS_TIMEOUT_MS), allocates
//             its FIFO and registers it; the proxy sends every slot the
//             executor posts and frees it once the backend is done with it.
// GPU mode: kernels use the FIFO, so it starts zeroed and is pinned and mapped
// (host_fifo_mapping.h); the end handed to the executor carries the device
// addresses while the proxy keeps working on the link's host pointers.
#include "transports/net/net_transport.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/host_identity.h"
#include "core/params.h"
#include "core/result.h"
#include "core/wait_limit.h"
#include "transports/net/net_backends.h"
#include "transports/net/net_proxy.h"
#include "transports/net/net_slot_placement.h"

namespace chorus {
namespace {

constexpr uint32_t kNetHandleMagic = 0x4e45544c;  // "NETL"

// What travels from receiver to sender ahead of the backend's own handle.
struct NetHandleHeader {
  uint32_t magic;
  uint32_t slotBytes;
  uint64_t backendHash;  // both sides must use the same backend
  uint32_t nslots;
  uint32_t reserved;
};

uint64_t backendHash(const chorusNet_v1_t* net) { return hashBytes(net->name, strlen(net->name)); }

std::string linkLabel(const ConnRequest& req, const chorusNet_v1_t* net, int dev) {
  chorusNetProperties_v1_t props{};
  const char* devName = net->getProperties(dev, &props) == ncclSuccess && props.name ? props.name : "?";
  return req.label + " via " + net->name + "/" + devName;
}

// Same host (NCCL_SHM_DISABLE=1): the executor can also watch the peer's pid.
int pidToWatch(const PeerInfo& peer) { return peer.hostHash == hostHash() ? peer.pid : 0; }

}  // namespace

bool NetTransport::canConnect(const PeerInfo& self, const PeerInfo& peer) const {
  if (self.hostHash != peer.hostHash) return true;
  return params::shmDisable() != 0 && self.processToken != peer.processToken;
}

ncclResult_t NetTransport::createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                                      std::vector<uint8_t>* handle) {
  const chorusNet_v1_t* net = nullptr;
  int ndev = 0;
  CHORUS_CHECK(netChooseBackend(&net, &ndev, req.netName));
  const int dev = req.channel % ndev;
  auto link = std::make_shared<NetLink>(false, net, linkLabel(req, net, dev));
  link->waitLimitMs = req.waitLimitMs;
  link->ackDelayUs = params::netAckDelayUs();
  link->kernelDriven = req.deviceMemory;
  link->coresShared = req.coresShared;
  link->dev = dev;
  if (!link->kernelDriven && params::netUserMemory() != 0) link->landingRecv = netLandingRecvFor(net);
  if (link->landingRecv != nullptr) link->landings = std::make_unique<LandingTable>();
  NetSlotPlan plan;
  CHORUS_CHECK(netPlaceSlots(req, net, dev, false, &plan));
  CHORUS_CHECK(netAllocFifo(*link, req, plan));
  char* deviceSlots = link->deviceSlots != nullptr ? link->slots : nullptr;
  uint8_t netHandle[CHORUS_NET_HANDLE_BYTES] = {};
  clearLastError();
  ncclResult_t res = net->listen(dev, netHandle, &link->listenComm);
  if (res != ncclSuccess) return fail(res, "net: %s: listen failed: %s", link->label.c_str(), lastErrorMessage());
  NetHandleHeader hdr{kNetHandleMagic, req.slotBytes, backendHash(net), req.nslots, 0};
  handle->resize(sizeof(hdr) + CHORUS_NET_HANDLE_BYTES);
  memcpy(handle->data(), &hdr, sizeof(hdr));
  memcpy(handle->data() + sizeof(hdr), netHandle, CHORUS_NET_HANDLE_BYTES);
  CHORUS_INFO(kLogNet, "net: %s: receiver listening (slots %u x %u B)", link->label.c_str(), req.nslots, req.slotBytes);
  std::shared_ptr<void> fifo = link->fifo;
  *end = NetProxy::forThisProcess().attach(std::move(link), req.peerRank, pidToWatch(peer));
  return netMapEndForKernels(req, deviceSlots, std::move(fifo), end);
}

ncclResult_t NetTransport::connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                                       FifoEnd* end) {
  const chorusNet_v1_t* net = nullptr;
  int ndev = 0;
  CHORUS_CHECK(netChooseBackend(&net, &ndev, req.netName));
  NetHandleHeader hdr{};
  if (handle.size() != sizeof(hdr) + CHORUS_NET_HANDLE_BYTES)
    return fail(ncclInternalError, "net: %s: handle of %zu bytes from rank %d", req.label.c_str(), handle.size(),
                req.peerRank);
  memcpy(&hdr, handle.data(), sizeof(hdr));
  if (hdr.magic != kNetHandleMagic || hdr.backendHash != backendHash(net))
    return fail(ncclInvalidUsage,
                "net: %s: rank %d listens with another network backend than this rank's %s (set NCCL_NET and "
                "NCCL_NET_PLUGIN the same on every rank)",
                req.label.c_str(), req.peerRank, net->name);
  CHORUS_CHECK(checkPeerSlots("net", req, hdr.slotBytes, hdr.nslots));
  const int dev = req.channel % ndev;
  auto link = std::make_shared<NetLink>(true, net, linkLabel(req, net, dev));
  link->kernelDriven = req.deviceMemory;
  link->coresShared = req.coresShared;
  link->dev = dev;
  link->waitLimitMs = req.waitLimitMs;
  const auto deadline = deadlineAfterLimit(req.waitLimitMs);
  for (;;) {
    clearLastError();
    ncclResult_t res = net->connect(dev, handle.data() + sizeof(hdr), &link->comm);
    if (res != ncclSuccess)
      return fail(res, "net: %s: connect to rank %d failed: %s", link->label.c_str(), req.peerRank, lastErrorMessage());
    if (link->comm != nullptr) break;
    if (std::chrono::steady_clock::now() >= deadline)
      return fail(ncclRemoteError, "net: %s: connect to rank %d did not complete within %lld ms (CHORUS_TIMEOUT_MS)",
                  link->label.c_str(), req.peerRank, (long long)req.waitLimitMs);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!link->kernelDriven && params::netUserMemory() != 0) link->gatherSend = netGatherSendFor(net, link->comm);
  NetSlotPlan plan;
  ncclResult_t res = netPlaceSlots(req, net, dev, true, &plan);
  if (res == ncclSuccess) res = netAllocFifo(*link, req, plan);
  if (res == ncclSuccess) res = registerLinkSlots(*link);
  if (res != ncclSuccess) {
    std::string why = lastErrorMessage();
    net->closeSend(link->comm);
    return fail(res, "net: %s: setting up the slots failed: %s", link->label.c_str(), why.c_str());
  }
  CHORUS_INFO(kLogNet, "net: %s: sender connected", link->label.c_str());
  char* deviceSlots = link->deviceSlots != nullptr ? link->slots : nullptr;
  std::shared_ptr<void> fifo = link->fifo;
  *end = NetProxy::forThisProcess().attach(std::move(link), req.peerRank, pidToWatch(peer));
  return netMapEndForKernels(req, deviceSlots, std::move(fifo), end);
}

bool NetTransport::awaitRetired(std::chrono::milliseconds bound) {
  NetProxy* proxy = NetProxy::existing();
  return proxy == nullptr || proxy->awaitRetired(bound);
}

}  // namespace chorus
