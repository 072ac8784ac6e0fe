#include "bootstrap/bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "bootstrap/mesh.h"
#include "core/log.h"
#include "core/result.h"

namespace chorus {

Bootstrap::Bootstrap(std::shared_ptr<Store> store, std::string prefix, int rank, int nranks)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), nranks_(nranks) {}

Bootstrap::Bootstrap(std::shared_ptr<Mesh> mesh, std::string prefix, int rank, std::vector<SockAddr> mailboxes)
    : mesh_(std::move(mesh)),
      mailboxes_(std::move(mailboxes)),
      prefix_(std::move(prefix)),
      rank_(rank),
      nranks_(static_cast<int>(mailboxes_.size())) {
  mesh_->join(prefix_);
}

Bootstrap::~Bootstrap() {
  unpublishStatus();
  if (mesh_) mesh_->leave(prefix_);
}

std::unique_ptr<Bootstrap> Bootstrap::child(std::string prefix, const std::vector<int>& members) const {
  int newRank = -1;
  std::vector<SockAddr> boxes;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank_) newRank = static_cast<int>(i);
    if (mesh_) boxes.push_back(mailboxes_.at(static_cast<size_t>(members[i])));
  }
  if (mesh_) return std::make_unique<Bootstrap>(mesh_, std::move(prefix), newRank, std::move(boxes));
  return std::make_unique<Bootstrap>(store_, std::move(prefix), newRank, static_cast<int>(members.size()));
}

uint64_t Bootstrap::nextEpoch() {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_++;
}

std::string Bootstrap::epochKey(uint64_t epoch, const std::string& rest) const {
  return prefix_ + "e" + std::to_string(epoch) + "/" + rest;
}

// The tag is length-prefixed and the key ends in ';', so no key is a prefix of
// another and erasePrefix(key) removes exactly that message.
std::string Bootstrap::p2pRest(int src, int dst, const std::string& tag, uint64_t seq) {
  return "p/" + std::to_string(src) + "-" + std::to_string(dst) + "/" + std::to_string(tag.size()) + ":" + tag + "/" +
         std::to_string(seq);
}

std::string Bootstrap::p2pKey(int src, int dst, const std::string& tag, uint64_t seq) const {
  return prefix_ + p2pRest(src, dst, tag, seq) + ";";
}

ncclResult_t Bootstrap::checkPeer(int peer, const char* what) const {
  if (rank_ < 0 || rank_ >= nranks_)
    return fail(ncclInvalidUsage, "bootstrap: %s on rank %d of %d", what, rank_, nranks_);
  if (peer < 0 || peer >= nranks_)
    return fail(ncclInvalidArgument, "bootstrap: %s with peer %d outside [0, %d)", what, peer, nranks_);
  return ncclSuccess;
}

ncclResult_t Bootstrap::allGather(const void* mine, size_t bytes, void* all, const WaitBound& bound) {
  CHORUS_CHECK(checkPeer(rank_, "allGather"));
  if (mesh_) return meshAllGather(mine, bytes, all, bound);
  uint64_t epoch = nextEpoch();
  auto* out = static_cast<uint8_t*>(all);
  const auto* in = static_cast<const uint8_t*>(mine);
  std::vector<uint8_t> own(in, in + bytes);
  if (nranks_ > 1) {
    CHORUS_CHECK(store_->set(epochKey(epoch, "ag/" + std::to_string(rank_)), own));
    std::vector<std::string> keys;
    std::vector<int> from;
    for (int r = 0; r < nranks_; ++r) {
      if (r == rank_) continue;
      keys.push_back(epochKey(epoch, "ag/" + std::to_string(r)));
      from.push_back(r);
    }
    std::vector<std::vector<uint8_t>> vals;
    CHORUS_CHECK(store_->get(keys, &vals, bound));
    for (size_t i = 0; i < vals.size(); ++i) {
      if (vals[i].size() != bytes)
        return fail(ncclInvalidUsage, "bootstrap: allGather: rank %d contributed %zu bytes, rank %d expected %zu",
                    from[i], vals[i].size(), rank_, bytes);
      if (bytes != 0) memcpy(out + static_cast<size_t>(from[i]) * bytes, vals[i].data(), bytes);
    }
  }
  if (bytes != 0) memcpy(out + static_cast<size_t>(rank_) * bytes, own.data(), bytes);
  return ncclSuccess;
}

// Counts this rank in barrier `epoch`; the last one to arrive sets the release flag.
ncclResult_t Bootstrap::arrive(uint64_t epoch, int64_t* arrived) {
  CHORUS_CHECK(store_->add(epochKey(epoch, "bar/count"), 1, arrived));
  if (*arrived > nranks_)
    return fail(ncclInternalError,
                "bootstrap: barrier %llu counted %lld arrivals for %d ranks (did ranks call collectives in "
                "different orders?)",
                static_cast<unsigned long long>(epoch), static_cast<long long>(*arrived), nranks_);
  if (*arrived == nranks_) CHORUS_CHECK(store_->set(epochKey(epoch, "bar/done"), {}));
  return ncclSuccess;
}

ncclResult_t Bootstrap::arrivedCount(uint64_t epoch, int64_t* arrived) {
  return store_->add(epochKey(epoch, "bar/count"), 0, arrived);
}

ncclResult_t Bootstrap::barrier(const WaitBound& bound) {
  CHORUS_CHECK(checkPeer(rank_, "barrier"));
  if (mesh_) return meshBarrier(bound);
  uint64_t epoch = nextEpoch();
  if (nranks_ == 1) return ncclSuccess;
  const std::string countKey = epochKey(epoch, "bar/count");
  int64_t arrived = 0;
  CHORUS_CHECK(arrive(epoch, &arrived));
  std::vector<std::vector<uint8_t>> vals;
  ncclResult_t res = store_->get({epochKey(epoch, "bar/done")}, &vals, bound);
  if (res != ncclSuccess) {
    // Say how many made it: that tells a hung rank from a dead store. The
    // probe may fail too; the original error is what the caller must see.
    const std::string cause = lastErrorMessage();
    int64_t now = 0;
    if (store_->add(countKey, 0, &now) == ncclSuccess)
      return fail(res, "bootstrap: barrier %llu on rank %d: %lld of %d ranks had arrived: %s",
                  static_cast<unsigned long long>(epoch), rank_, static_cast<long long>(now), nranks_, cause.c_str());
    return fail(res, "%s", cause.c_str());
  }
  if (rank_ == 0) CHORUS_CHECK(eraseBefore(epoch));
  return ncclSuccess;
}

WaitBound Bootstrap::watchPeerGone(const WaitBound& bound, const PeerGoneCheck& peerGone, std::string* gone) {
  static constexpr auto kCheckEvery = std::chrono::milliseconds(250);
  WaitBound watched = bound;
  watched.stop = [peerGone, gone, nextCheck = Clock::now() + kCheckEvery]() mutable {
    if (!gone->empty()) return true;
    const auto now = Clock::now();
    if (!peerGone || now < nextCheck) return false;
    nextCheck = now + kCheckEvery;
    return peerGone(gone);
  };
  return watched;
}

ncclResult_t Bootstrap::finalizeBarrier(const WaitBound& bound, bool wait, const PeerGoneCheck& peerGone) {
  CHORUS_CHECK(checkPeer(rank_, "barrier"));
  if (mesh_) return meshFinalizeBarrier(bound, wait, peerGone);
  const uint64_t epoch = nextEpoch();
  if (nranks_ == 1) return ncclSuccess;
  int64_t arrived = 0;
  CHORUS_CHECK(arrive(epoch, &arrived));
  if (!wait) return ncclSuccess;
  // The store waits as usual (and logs every 30 s); the stop condition looks
  // for a vanished peer about every 250 ms.
  std::string gone;
  const WaitBound watched = watchPeerGone(bound, peerGone, &gone);
  std::vector<std::vector<uint8_t>> vals;
  const ncclResult_t res = store_->get({epochKey(epoch, "bar/done")}, &vals, watched);
  if (res != ncclSuccess) {
    if (gone.empty()) return res;  // aborted, the limit, or the store is lost
    // A peer that saw the release first may have left already: then the
    // barrier is complete. Otherwise the peer left before arriving.
    if (arrivedCount(epoch, &arrived) != ncclSuccess || arrived < nranks_)
      return fail(ncclRemoteError, "rank %d: %s (%lld of %d ranks had reached the finalize barrier)", rank_,
                  gone.c_str(), static_cast<long long>(arrived), nranks_);
  }
  if (rank_ == 0) CHORUS_CHECK(eraseBefore(epoch));
  return ncclSuccess;
}

ncclResult_t Bootstrap::eraseBefore(uint64_t epoch) {
  uint64_t from = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    from = erasedBelow_;
    erasedBelow_ = epoch;
  }
  for (uint64_t e = from; e < epoch; ++e) CHORUS_CHECK(store_->erasePrefix(prefix_ + "e" + std::to_string(e) + "/"));
  return ncclSuccess;
}

ncclResult_t Bootstrap::broadcast(void* data, size_t bytes, int root, const WaitBound& bound) {
  CHORUS_CHECK(checkPeer(root, "broadcast"));
  if (mesh_) return meshBroadcast(data, bytes, root, bound);
  uint64_t epoch = nextEpoch();
  if (nranks_ == 1) return ncclSuccess;
  const std::string key = epochKey(epoch, "bc/" + std::to_string(root));
  auto* p = static_cast<uint8_t*>(data);
  if (rank_ == root) return store_->set(key, std::vector<uint8_t>(p, p + bytes));
  std::vector<std::vector<uint8_t>> vals;
  CHORUS_CHECK(store_->get({key}, &vals, bound));
  if (vals[0].size() != bytes)
    return fail(ncclInvalidUsage, "bootstrap: broadcast: root %d sent %zu bytes, rank %d expected %zu", root,
                vals[0].size(), rank_, bytes);
  if (bytes != 0) memcpy(p, vals[0].data(), bytes);
  return ncclSuccess;
}

ncclResult_t Bootstrap::send(int peer, const std::string& tag, std::vector<uint8_t> data) {
  CHORUS_CHECK(checkPeer(peer, "send"));
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = sendSeq_[{peer, tag}]++;
  }
  if (mesh_) return post(peer, p2pRest(rank_, peer, tag, seq), std::move(data), waitBoundLimit(0));
  return store_->set(p2pKey(rank_, peer, tag, seq), std::move(data));
}

ncclResult_t Bootstrap::recv(int peer, const std::string& tag, std::vector<uint8_t>* data, const WaitBound& bound) {
  CHORUS_CHECK(checkPeer(peer, "recv"));
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = recvSeq_[{peer, tag}]++;
  }
  if (mesh_) return take(peer, p2pRest(peer, rank_, tag, seq), data, bound);
  const std::string key = p2pKey(peer, rank_, tag, seq);
  std::vector<std::vector<uint8_t>> vals;
  CHORUS_CHECK(store_->get({key}, &vals, bound));
  *data = std::move(vals[0]);
  return store_->erasePrefix(key);
}

bool Bootstrap::drainArrived(const std::string& tag,
                             const std::function<bool(int, const std::vector<uint8_t>&)>& take) {
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    for (;;) {
      std::vector<uint8_t> bytes;
      bool got = false;
      if (tryRecv(peer, tag, &bytes, &got) != ncclSuccess || !got) break;
      if (take(peer, bytes)) return true;
    }
  }
  return false;
}

ncclResult_t Bootstrap::tryRecv(int peer, const std::string& tag, std::vector<uint8_t>* data, bool* got) {
  *got = false;
  CHORUS_CHECK(checkPeer(peer, "tryRecv"));
  std::lock_guard<std::mutex> lock(tryMu_);  // one poller at a time, so the sequence number stays ours
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    seq = recvSeq_[{peer, tag}];
  }
  // Mesh mode: the message waits in this process's mailbox; else in the store.
  Store& box = mesh_ ? mesh_->local() : *store_;
  const std::string key = mesh_ ? meshKey(p2pRest(peer, rank_, tag, seq)) : p2pKey(peer, rank_, tag, seq);
  const std::string previous = lastErrorMessage();
  std::vector<std::vector<uint8_t>> vals;
  // A stop condition that is already true ends the wait at once, quietly
  // (failStoreWait's "aborted"), after one look at the key.
  const WaitBound probe{Clock::time_point::max(), nullptr, [] { return true; }};
  const bool present = box.get({key}, &vals, probe) == ncclSuccess;
  restoreLastError(previous);  // an absent message is not an error
  if (!present) return ncclSuccess;
  {
    std::lock_guard<std::mutex> l(mu_);
    ++recvSeq_[{peer, tag}];
  }
  *data = std::move(vals[0]);
  *got = true;
  return box.erasePrefix(key);
}

}  // namespace chorus
