#include "transport/connection_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/result.h"

namespace chorus {
namespace {
constexpr int64_t kUndeliveredGraceMs = 2000;
}  // namespace

const char* connClassName(ConnClass c) {
  switch (c) {
    case ConnClass::Ring:
      return "ring";
    case ConnClass::TreeUp:
      return "tree-up";
    case ConnClass::TreeDown:
      return "tree-down";
    case ConnClass::P2P:
      return "p2p";
    case ConnClass::Direct:
      return "direct";
  }
  return "?";
}

ConnectionTable::ConnectionTable(int rank, Bootstrap* bootstrap, std::vector<PeerInfo> peers, uint64_t commHash,
                                 int64_t waitLimitMs, TrafficStats* traffic, std::string netName)
    : rank_(rank),
      bootstrap_(bootstrap),
      peers_(std::move(peers)),
      commHash_(commHash),
      waitLimitMs_(waitLimitMs),
      traffic_(traffic),
      netName_(std::move(netName)) {}

std::string ConnectionTable::tagOf(const ConnKey& key, int from, int to) const {
  char buf[96];
  snprintf(buf, sizeof(buf), "conn/%s/p%u/c%u/%d-%d", connClassName(key.cls), key.proto, key.channel, from, to);
  return buf;
}

ConnRequest ConnectionTable::requestFor(const ConnKey& key, int from, int to, uint32_t slotBytes,
                                        uint32_t nslots) const {
  ConnRequest req;
  req.selfRank = rank_;
  req.peerRank = key.peer;
  req.slotBytes = slotBytes;
  req.nslots = nslots;
  req.channel = key.channel;
  req.deviceMemory = !peers_[rank_].hostMode;
  req.selfDevice = peers_[rank_].cudaDev;
  char buf[128];
  snprintf(buf, sizeof(buf), "comm %016llx %s ch%u %d->%d", (unsigned long long)commHash_, connClassName(key.cls),
           key.channel, from, to);
  req.label = buf;
  req.waitLimitMs = waitLimitMs_;
  req.netName = netName_;
  req.nicRoutes = nicRoutes_;
  req.coresShared = coresShared_;
  return req;
}

ncclResult_t ConnectionTable::requestRecv(const ConnKey& key, uint32_t slotBytes, uint32_t nslots,
                                          RecvConnector** out) {
  auto it = recvs_.find(key);
  if (it != recvs_.end()) {
    *out = it->second.get();
    return ncclSuccess;
  }
  const PeerInfo& peer = peers_[key.peer];
  Transport* t = selectTransport(peers_[rank_], peer);
  if (t == nullptr) return fail(ncclInvalidUsage, "no transport can connect rank %d to rank %d", rank_, key.peer);
  ConnRequest req = requestFor(key, key.peer, rank_, slotBytes, nslots);
  FifoEnd end;
  std::vector<uint8_t> handle;
  CHORUS_CHECK(t->createRecv(req, peer, &end, &handle));
  if (traffic_ != nullptr) end.traffic = traffic_->recvOver(linkKindOf(t->name()));
  if (ncclResult_t sent = bootstrap_->send(key.peer, tagOf(key, key.peer, rank_), std::move(handle));
      sent != ncclSuccess) {
    if (undeliveredCode_ == ncclSuccess) undeliveredCode_ = sent;
    undelivered_ += (undelivered_.empty() ? "" : "; ") + std::string(lastErrorMessage());
  }
  CHORUS_TRACE(kLogInit, "%s: receiver via %s", req.label.c_str(), t->name());
  auto conn = std::make_unique<RecvConnector>(std::move(end));
  *out = conn.get();
  recvs_[key] = std::move(conn);
  if (std::find(announced_.begin(), announced_.end(), key.peer) == announced_.end()) announced_.push_back(key.peer);
  return ncclSuccess;
}

ncclResult_t ConnectionTable::requestSend(const ConnKey& key, uint32_t slotBytes, uint32_t nslots,
                                          SendConnector** out) {
  auto it = sends_.find(key);
  if (it == sends_.end()) {
    // Placeholder with no FIFO; connectAll() replaces its contents in place so
    // the pointer handed out now stays valid.
    it = sends_.emplace(key, std::make_unique<SendConnector>(FifoEnd{})).first;
    pending_.push_back({key, requestFor(key, rank_, key.peer, slotBytes, nslots)});
  }
  *out = it->second.get();
  return ncclSuccess;
}

// With a receiver handle undelivered the connection cannot work, but the
// senders' waits still run, briefly: they watch the peers, so the rank that
// died first is named even when the undelivered handle was for a rank that
// failed because of it (and left).
ncclResult_t ConnectionTable::connectAll(const WaitBound& bound) {
  if (undeliveredCode_ == ncclSuccess) return connectPending(bound);
  WaitBound brief = bound;
  brief.deadline = std::min(bound.deadline, Clock::now() + std::chrono::milliseconds(kUndeliveredGraceMs));
  if (connectPending(brief) == ncclSuccess)
    return fail(undeliveredCode_, "rank %d: could not announce receivers: %s", rank_, undelivered_.c_str());
  const std::string then = lastErrorMessage();
  return fail(undeliveredCode_, "rank %d: could not announce receivers: %s (then: %s)", rank_, undelivered_.c_str(),
              then.c_str());
}

ncclResult_t ConnectionTable::connectPending(const WaitBound& bound) {
  while (!pending_.empty()) {
    PendingSend p = pending_.back();
    const PeerInfo& peer = peers_[p.key.peer];
    Transport* t = selectTransport(peers_[rank_], peer);
    if (t == nullptr) return fail(ncclInvalidUsage, "no transport can connect rank %d to rank %d", rank_, p.key.peer);
    std::vector<uint8_t> handle;
    ncclResult_t res = bootstrap_->recv(p.key.peer, tagOf(p.key, rank_, p.key.peer), &handle, bound);
    if (res != ncclSuccess) {
      std::string why = lastErrorMessage();
      // Asked to stop (an abort, a revoke, a peer's verdict): the caller says
      // why; nothing is known against the peer.
      if (waitAborted(bound))
        return failQuiet(res, kLogInit, "rank %d: stopped waiting to connect to peer rank %d for %s (%s)", rank_,
                         p.key.peer, p.req.label.c_str(), why.c_str());
      return fail(res,
                  "rank %d: could not connect to peer rank %d (pid %d) for %s: the peer is dead, stuck or did not "
                  "make the matching call (%s)",
                  rank_, p.key.peer, peer.pid, p.req.label.c_str(), why.c_str());
    }
    FifoEnd end;
    CHORUS_CHECK(t->connectSend(p.req, peer, handle, &end));
    if (traffic_ != nullptr) end.traffic = traffic_->sentOver(linkKindOf(t->name()));
    CHORUS_TRACE(kLogInit, "%s: sender via %s", p.req.label.c_str(), t->name());
    *sends_[p.key] = SendConnector(std::move(end));
    pending_.pop_back();
  }
  return ncclSuccess;
}

std::vector<int> ConnectionTable::pendingPeers() const {
  std::vector<int> peers;
  for (const PendingSend& p : pending_)
    if (std::find(peers.begin(), peers.end(), p.key.peer) == peers.end()) peers.push_back(p.key.peer);
  return peers;
}

bool ConnectionTable::brokenLink(std::string* why) const {
  auto broken = [&](const FifoEnd& end) {
    if (!end.health || !end.health->failed()) return false;
    *why = "link to peer rank " + std::to_string(end.peer) + " (pid " + std::to_string(peers_[end.peer].pid) +
           ") failed: " + end.health->message;
    return true;
  };
  for (const auto& [key, conn] : recvs_)
    if (broken(conn->end())) return true;
  for (const auto& [key, conn] : sends_)
    if (broken(conn->end())) return true;
  return false;
}

ncclResult_t ConnectionTable::checkLink(const FifoEnd& end) const {
  if (!end.health || !end.health->failed()) return ncclSuccess;
  const PeerInfo& p = peers_[end.peer];
  return fail(static_cast<ncclResult_t>(end.health->code),
              "rank %d: link to peer rank %d (pid %d, host %016llx) failed: %s", rank_, end.peer, p.pid,
              (unsigned long long)p.hostHash, end.health->message);
}

}  // namespace chorus
