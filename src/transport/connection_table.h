// A communicator's connectors, created lazily the first time a plan needs
// them. Plans first ask for every connector they use (request*), then
// connectAll() finishes the sender sides. Receivers are created and announced
// immediately; only senders wait, for the handle their receiver announced.
// Because every rank of a group announces all its receivers before any sender
// waits (see group execution), one thread may drive several ranks' plans.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/traffic_stats.h"
#include "transport/connector_source.h"
#include "transport/fifo.h"
#include "transport/transport.h"

namespace chorus {

class ConnectionTable final : public ConnectorSource {
 public:
  // `waitLimitMs`: the communicator's CHORUS_TIMEOUT_MS, passed to the transports (0 = no limit).
  // `traffic`: the communicator's counters the connectors add to (null: none; must outlive the table).
  // `netName`: its ncclConfig_t.netName ("": NCCL_NET decides).
  ConnectionTable(int rank, Bootstrap* bootstrap, std::vector<PeerInfo> peers, uint64_t commHash,
                  int64_t waitLimitMs = 0, TrafficStats* traffic = nullptr, std::string netName = "");

  // Returns the connector; a new receiver is created and announced now, a new
  // sender is registered and completed by connectAll().
  ncclResult_t requestRecv(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, RecvConnector** out) override;
  ncclResult_t requestSend(const ConnKey& key, uint32_t slotBytes, uint32_t nslots, SendConnector** out) override;
  ncclResult_t connectAll(const WaitBound& bound);
  // Whether a requested sender still waits for connectAll() (or connectAll
  // has an undelivered receiver handle to report).
  bool hasPending() const { return !pending_.empty() || undeliveredCode_ != ncclSuccess; }
  // The ranks whose receiver handles connectAll() still waits for.
  std::vector<int> pendingPeers() const;
  // The ranks receivers were announced to since the last takeAnnounced(),
  // once each (a plan that made them sends them its setup note).
  bool hasAnnounced() const { return !announced_.empty(); }
  std::vector<int> takeAnnounced() { return std::exchange(announced_, {}); }
  // Fails (with the mover's code and message, naming the peer) if the
  // connector's data is moved by a proxy whose link broke. Called by the
  // executor for the connectors it waits on.
  ncclResult_t checkLink(const FifoEnd& end) const;
  // Whether any connector's network link broke; *why then says which (nothing
  // is logged). Finalize watches for a peer that went away with it.
  bool brokenLink(std::string* why) const;

  // The send connector for `key`, or nullptr (tests inspect its FIFO).
  const SendConnector* findSend(const ConnKey& key) const {
    auto it = sends_.find(key);
    return it == sends_.end() ? nullptr : it->second.get();
  }

  // Every connector made so far (receivers, then senders).
  template <class Fn>
  void forEachRecv(Fn&& fn) const {
    for (auto& [key, r] : recvs_) fn(*r);
  }
  template <class Fn>
  void forEachSend(Fn&& fn) const {
    for (auto& [key, s] : sends_) fn(*s);
  }
  template <class Fn>
  void forEachEnd(Fn&& fn) const {
    for (auto& [key, r] : recvs_) fn(r->end());
    for (auto& [key, s] : sends_) fn(s->end());
  }

  const PeerInfo& peer(int rank) const { return peers_[rank]; }
  const std::vector<PeerInfo>& peers() const { return peers_; }
  // GPU mode: this rank's GPU-NIC routes, set once the topology is built
  // (connections made later carry them: ConnRequest::nicRoutes).
  void setNicRoutes(std::shared_ptr<const topo::GpuNicRoutes> routes) { nicRoutes_ = std::move(routes); }
  // The ranks on this machine outnumber its CPUs (ConnRequest::coresShared).
  void setCoresShared(bool shared) { coresShared_ = shared; }

 private:
  struct PendingSend {
    ConnKey key;
    ConnRequest req;
  };
  ncclResult_t connectPending(const WaitBound& bound);
  std::string tagOf(const ConnKey& key, int from, int to) const;
  ConnRequest requestFor(const ConnKey& key, int from, int to, uint32_t slotBytes, uint32_t nslots) const;

  int rank_;
  Bootstrap* bootstrap_;
  std::vector<PeerInfo> peers_;
  uint64_t commHash_;
  int64_t waitLimitMs_;
  TrafficStats* traffic_;
  std::string netName_;
  std::shared_ptr<const topo::GpuNicRoutes> nicRoutes_;
  bool coresShared_ = false;
  std::map<ConnKey, std::unique_ptr<RecvConnector>> recvs_;
  std::map<ConnKey, std::unique_ptr<SendConnector>> sends_;
  std::vector<PendingSend> pending_;
  std::vector<int> announced_;
  // Receiver handles that could not be sent (their peers' processes are
  // gone), every such peer named; connectAll reports them.
  ncclResult_t undeliveredCode_ = ncclSuccess;
  std::string undelivered_;
};

}  // namespace chorus
