// Bootstrap's mesh mode (see bootstrap.h): collectives as rank-to-rank
// messages through the receivers' mailboxes.
#include <cstring>
#include <set>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bruck.h"
#include "bootstrap/mesh.h"
#include "core/little_endian.h"
#include "core/log.h"
#include "core/result.h"

namespace chorus {
namespace {

// How long a finalize waiter whose peer left still expects the release.
constexpr int64_t kLateReleaseMs = 1000;

std::string roundKey(const char* kind, uint64_t epoch, int round, int from) {
  return std::string(kind) + std::to_string(epoch) + "/round" + std::to_string(round) + "/from" + std::to_string(from);
}

}  // namespace

ncclResult_t Bootstrap::post(int peer, const std::string& rest, std::vector<uint8_t> data, const WaitBound& bound) {
  std::shared_ptr<Store> box;
  CHORUS_CHECK(mesh_->peer(mailboxes_[peer], peer, bound, &box));
  const ncclResult_t res = box->set(meshKey(rest), std::move(data));
  if (res == ncclSuccess) return ncclSuccess;
  const std::string cause = lastErrorMessage();
  if (res != ncclRemoteError) return fail(res, "%s", cause.c_str());  // e.g. too large: not the peer's fault
  mesh_->markGone(mailboxes_[peer]);
  return fail(ncclRemoteError, "bootstrap: rank %d cannot deliver a message to rank %d: %s", rank_, peer,
              cause.c_str());
}

// Waits for a message in this process's mailbox; a failure names the key,
// which names the sender (`from` is part of every key).
ncclResult_t Bootstrap::take(int from, const std::string& rest, std::vector<uint8_t>* data, const WaitBound& bound) {
  (void)from;
  const std::string key = meshKey(rest);
  std::vector<std::vector<uint8_t>> vals;
  CHORUS_CHECK(mesh_->local().get({key}, &vals, bound));
  *data = std::move(vals[0]);
  return mesh_->local().erasePrefix(key);
}

void Bootstrap::publishStatus(std::function<std::vector<uint8_t>()> value) {
  if (!mesh_) return;
  mesh_->setLive(meshKey("status/" + std::to_string(rank_)), std::move(value));
  published_ = true;
}

void Bootstrap::unpublishStatus() {
  if (!published_) return;
  mesh_->removeLive(meshKey("status/" + std::to_string(rank_)));
  published_ = false;
}

ncclResult_t Bootstrap::queryStatus(int peer, int64_t boundMs, std::vector<uint8_t>* value) {
  if (!mesh_ || peer < 0 || peer >= nranks_)
    return fail(ncclInvalidUsage, "bootstrap: no status of rank %d to ask for", peer);
  const WaitBound bound = waitBoundAfter(boundMs);
  std::shared_ptr<Store> box;
  CHORUS_CHECK(mesh_->peer(mailboxes_[peer], peer, bound, &box));
  std::vector<std::vector<uint8_t>> vals;
  const ncclResult_t res = box->get({meshKey("status/" + std::to_string(peer))}, &vals, bound);
  if (res != ncclSuccess) {
    const std::string why = lastErrorMessage();
    return fail(ncclRemoteError, "bootstrap: rank %d's mailbox did not answer a status query: %s", peer, why.c_str());
  }
  *value = std::move(vals[0]);
  return ncclSuccess;
}

ncclResult_t Bootstrap::meshAllGather(const void* mine, size_t bytes, void* all, const WaitBound& bound) {
  const uint64_t epoch = nextEpoch();
  return bruckAllGather(
      rank_, nranks_, bytes, mine, all,
      [&](int round, int to, std::vector<uint8_t> data) {
        return post(to, roundKey("allgather", epoch, round, rank_), std::move(data), bound);
      },
      [&](int round, int from, std::vector<uint8_t>* data) {
        return take(from, roundKey("allgather", epoch, round, from), data, bound);
      });
}

// Dissemination barrier: in round k, tell rank+2^k and hear from rank-2^k.
ncclResult_t Bootstrap::meshBarrier(const WaitBound& bound) {
  const uint64_t epoch = nextEpoch();
  const int n = nranks_;
  int round = 0;
  for (int dist = 1; dist < n; dist <<= 1, ++round) {
    const int to = (rank_ + dist) % n, from = (rank_ - dist + n) % n;
    CHORUS_CHECK(post(to, roundKey("barrier", epoch, round, rank_), {}, bound));
    std::vector<uint8_t> in;
    CHORUS_CHECK(take(from, roundKey("barrier", epoch, round, from), &in, bound));
  }
  return ncclSuccess;
}

// Binomial tree rooted at `root`, on ranks relative to it.
ncclResult_t Bootstrap::meshBroadcast(void* data, size_t bytes, int root, const WaitBound& bound) {
  const uint64_t epoch = nextEpoch();
  const int n = nranks_;
  if (n == 1) return ncclSuccess;
  const int rel = (rank_ - root + n) % n;
  auto* p = static_cast<uint8_t*>(data);
  std::vector<uint8_t> buf;
  if (rel == 0) buf.assign(p, p + bytes);
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((rel & mask) == 0) continue;
    const int from = (rel - mask + root) % n;
    CHORUS_CHECK(take(from, roundKey("broadcast", epoch, 0, from), &buf, bound));
    if (buf.size() != bytes)
      return fail(ncclInvalidUsage, "bootstrap: broadcast: root %d sent %zu bytes, rank %d expected %zu", root,
                  buf.size(), rank_, bytes);
    break;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < n) CHORUS_CHECK(post((rel + mask + root) % n, roundKey("broadcast", epoch, 0, rank_), buf, bound));
  if (rel != 0 && bytes != 0) memcpy(p, buf.data(), bytes);
  return ncclSuccess;
}

// The last rank to arrive tells every process (one key per mailbox: all the
// waiting ranks of a process read the same one). A process that cannot be
// reached has no rank waiting any more: that is not this rank's failure.
ncclResult_t Bootstrap::releaseFinalize(uint64_t epoch) {
  std::set<std::string> told;
  for (int r = 0; r < nranks_; ++r) {
    if (!told.insert(mailboxes_[r].str()).second) continue;
    std::shared_ptr<Store> box;
    const std::string key = meshKey("finalize" + std::to_string(epoch) + "/done");
    if (mesh_->peer(mailboxes_[r], r, waitBoundLimit(0), &box) != ncclSuccess || box->set(key, {}) != ncclSuccess) {
      CHORUS_INFO(kLogBootstrap, "bootstrap: finalize: rank %d could not release rank %d's process: %s", rank_, r,
                  lastErrorMessage());
      mesh_->markGone(mailboxes_[r]);
    }
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::meshFinalizeBarrier(const WaitBound& bound, bool wait, const PeerGoneCheck& peerGone) {
  const uint64_t epoch = nextEpoch();
  if (nranks_ == 1) return ncclSuccess;
  const std::string countKey = meshKey("finalize" + std::to_string(epoch) + "/count");
  std::shared_ptr<Store> root;
  CHORUS_CHECK(mesh_->peer(mailboxes_[0], 0, bound, &root));
  int64_t arrived = 0;
  if (root->add(countKey, 1, &arrived) != ncclSuccess) {
    const std::string cause = lastErrorMessage();
    return fail(ncclRemoteError, "rank %d: cannot reach rank 0 for the finalize barrier: %s", rank_, cause.c_str());
  }
  if (arrived > nranks_)
    return fail(ncclInternalError, "bootstrap: finalize barrier %llu counted %lld arrivals for %d ranks",
                static_cast<unsigned long long>(epoch), static_cast<long long>(arrived), nranks_);
  if (arrived == nranks_) CHORUS_CHECK(releaseFinalize(epoch));
  if (!wait) return ncclSuccess;
  std::string gone;
  const WaitBound watched = watchPeerGone(bound, peerGone, &gone);
  std::vector<std::vector<uint8_t>> vals;
  const std::string doneKey = meshKey("finalize" + std::to_string(epoch) + "/done");
  const ncclResult_t res = mesh_->local().get({doneKey}, &vals, watched);
  if (res == ncclSuccess || gone.empty()) return res;
  // A peer that was released first may have left already: then everyone had
  // arrived, and the release to this process is on its way.
  if (mesh_->local().get({doneKey}, &vals, waitBoundAfter(kLateReleaseMs)) == ncclSuccess) return ncclSuccess;
  if (root->add(countKey, 0, &arrived) != ncclSuccess || arrived < nranks_)
    return fail(ncclRemoteError, "rank %d: %s (%lld of %d ranks had reached the finalize barrier)", rank_, gone.c_str(),
                static_cast<long long>(arrived), nranks_);
  return ncclSuccess;
}

}  // namespace chorus
