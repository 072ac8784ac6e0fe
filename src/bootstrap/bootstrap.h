// Collective helpers for one communicator's ranks: allGather, barrier,
// broadcast, and tagged point-to-point messages for transport setup. Two
// modes behind one interface:
//
// Store mode (Bootstrap(store, ...)): everything goes through one shared
// store. Keys live under the communicator's `prefix`:
//   <prefix>e<epoch>/ag/<rank>        allGather contributions
//   <prefix>e<epoch>/bar/count|done   barrier counter and release flag
//   <prefix>e<epoch>/bc/<root>        broadcast payload
//   <prefix>p/<src>-<dst>/<taglen>:<tag>/<seq>;   point-to-point messages
// Every collective takes a fresh epoch, so repeated calls never collide; all
// ranks must therefore call the collectives in the same order, and one at a
// time per rank (send/recv may run concurrently with them, from any thread).
//
// Garbage: a receiver erases a point-to-point key once read. Collective keys
// are erased by rank 0 after a barrier: when barrier epoch b completes every
// rank has left every earlier collective, so epochs below b are dead. Barrier
// cost is O(nranks) store operations (a counter), not an allGather.
//
// Mesh mode (Bootstrap(mesh, ...), what communicators use): a message to rank
// r is written into r's process's mailbox (mesh.h) under
// <prefix>:<kind><epoch>/.../<src>; and r reads it locally and erases it.
// allGather is a dissemination (Bruck) all-gather, barrier a dissemination
// barrier, broadcast a binomial tree: log2(nranks) rounds each, no store that
// everyone shares, no root doing more than its share. The finalize barrier
// counts arrivals at rank 0's mailbox; the last to arrive releases every
// process. Whatever a communicator leaves in a mailbox is erased when its last
// member in that process is destroyed.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"

namespace chorus {

class Mesh;

class Bootstrap {
 public:
  Bootstrap(std::shared_ptr<Store> store, std::string prefix, int rank, int nranks);
  // Mesh mode: `mailboxes[r]` is where rank r receives.
  Bootstrap(std::shared_ptr<Mesh> mesh, std::string prefix, int rank, std::vector<SockAddr> mailboxes);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;
  // A split/shrink child's bootstrap: `members` lists this communicator's
  // ranks in the child's rank order and includes this rank. Nothing is
  // exchanged: the child inherits the mailboxes (or the store).
  std::unique_ptr<Bootstrap> child(std::string prefix, const std::vector<int>& members) const;

  // all = nranks*bytes, rank order; `mine` may alias all + rank*bytes.
  ncclResult_t allGather(const void* mine, size_t bytes, void* all, const WaitBound& bound);
  ncclResult_t barrier(const WaitBound& bound);
  // The barrier of ncclCommFinalize/ncclCommDestroy. With wait = false this
  // rank only arrives (another rank of this process waits for all of them).
  // Waiting, it calls `peerGone` about every 250 ms (from the waiting
  // thread): true (with a description) ends the wait with ncclRemoteError,
  // unless every rank had arrived by then (the barrier is then complete and
  // the peer merely left first).
  using PeerGoneCheck = std::function<bool(std::string* why)>;
  ncclResult_t finalizeBarrier(const WaitBound& bound, bool wait, const PeerGoneCheck& peerGone);
  // `data` holds `bytes` at the root and receives them elsewhere.
  ncclResult_t broadcast(void* data, size_t bytes, int root, const WaitBound& bound);
  // Point-to-point small messages (tag distinguishes concurrent exchanges), used for transport setup.
  ncclResult_t send(int peer, const std::string& tag, std::vector<uint8_t> data);
  ncclResult_t recv(int peer, const std::string& tag, std::vector<uint8_t>* data, const WaitBound& bound);
  // The next message from `peer` under `tag` if it has arrived: *got says
  // whether it had. Never waits for the message and never records an error
  // for its absence (stall reports poll with it).
  ncclResult_t tryRecv(int peer, const std::string& tag, std::vector<uint8_t>* data, bool* got);
  // Hands every message under `tag` that has arrived from the other ranks,
  // in rank order, to `take(peer, bytes)` (with tryRecv); stops at the first
  // `take` that returns true, and then returns true.
  bool drainArrived(const std::string& tag, const std::function<bool(int, const std::vector<uint8_t>&)>& take);

  // This rank's status, answered by its process's mailbox thread from
  // `value()` whenever a peer asks (queryStatus), even while the rank's own
  // thread is busy outside the library (mesh mode only; else nothing).
  // unpublishStatus must run before whatever `value` reads is destroyed.
  void publishStatus(std::function<std::vector<uint8_t>()> value);
  void unpublishStatus();
  // Asks rank `peer`'s mailbox for its status, waiting at most `boundMs`.
  // ncclRemoteError if its process is gone or it did not answer in time.
  ncclResult_t queryStatus(int peer, int64_t boundMs, std::vector<uint8_t>* value);

  std::shared_ptr<Store> store() const { return store_; }  // null in mesh mode
  const std::shared_ptr<Mesh>& mesh() const { return mesh_; }
  const std::string& prefix() const { return prefix_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  uint64_t nextEpoch();
  // `bound` plus a stop condition that calls `peerGone` about every 250 ms;
  // once it reports a gone peer (described in *gone) the wait ends.
  static WaitBound watchPeerGone(const WaitBound& bound, const PeerGoneCheck& peerGone, std::string* gone);
  std::string epochKey(uint64_t epoch, const std::string& rest) const;
  static std::string p2pRest(int src, int dst, const std::string& tag, uint64_t seq);
  std::string p2pKey(int src, int dst, const std::string& tag, uint64_t seq) const;
  ncclResult_t checkPeer(int peer, const char* what) const;
  ncclResult_t eraseBefore(uint64_t epoch);
  ncclResult_t arrive(uint64_t epoch, int64_t* arrived);
  ncclResult_t arrivedCount(uint64_t epoch, int64_t* arrived);
  // Mesh mode (bootstrap_mesh.cc).
  std::string meshKey(const std::string& rest) const { return prefix_ + ":" + rest + ";"; }
  ncclResult_t post(int peer, const std::string& rest, std::vector<uint8_t> data, const WaitBound& bound);
  ncclResult_t take(int from, const std::string& rest, std::vector<uint8_t>* data, const WaitBound& bound);
  ncclResult_t meshAllGather(const void* mine, size_t bytes, void* all, const WaitBound& bound);
  ncclResult_t meshBarrier(const WaitBound& bound);
  ncclResult_t meshFinalizeBarrier(const WaitBound& bound, bool wait, const PeerGoneCheck& peerGone);
  ncclResult_t meshBroadcast(void* data, size_t bytes, int root, const WaitBound& bound);
  ncclResult_t releaseFinalize(uint64_t epoch);

  const std::shared_ptr<Store> store_;
  const std::shared_ptr<Mesh> mesh_;
  const std::vector<SockAddr> mailboxes_;
  const std::string prefix_;
  const int rank_;
  const int nranks_;
  std::mutex tryMu_;  // serialises tryRecv
  std::mutex mu_;     // guards the counters below
  uint64_t epoch_ = 0;
  uint64_t erasedBelow_ = 0;
  std::map<std::pair<int, std::string>, uint64_t> sendSeq_, recvSeq_;
  bool published_ = false;
};

}  // namespace chorus
