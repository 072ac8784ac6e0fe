// The rank-to-rank layer of the bootstrap (see README.md, "After init"). Every
// process runs one mailbox per job secret: a store server that other
// processes write into and that its own ranks read locally. A process that
// already serves the job's store (it created the unique id, or it is rank 0
// under NCCL_COMM_ID) uses that server as its mailbox. A Mesh is one
// process's mailbox plus its connections to other processes' mailboxes; the
// communicators of the process that share a secret share one Mesh, so a split
// reuses the parent's connections and nothing goes through the id creator.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "bootstrap/wire.h"

namespace chorus {

class TcpStoreServer;

class Mesh {
 public:
  // The Mesh of this process for `secret`, started when there is none.
  // `jobStore` is the address of the job's store: a new mailbox listens on
  // the local address that routes there.
  static ncclResult_t open(const wire::Secret& secret, const SockAddr& jobStore, std::shared_ptr<Mesh>* out);
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const SockAddr& address() const { return addr_; }
  // This process's mailbox (in memory, no sockets).
  Store& local() { return *local_; }
  // The mailbox at `addr` (`rank` labels errors and the connection): this
  // process's own, or a pooled TCP connection made on first use.
  ncclResult_t peer(const SockAddr& addr, int rank, const WaitBound& bound, std::shared_ptr<Store>* out);
  // A pooled connection to `addr` was lost: the process behind it is gone
  // (a mailbox closes only with its process or once no rank uses it), so
  // later calls fail at once.
  void markGone(const SockAddr& addr);
  // A live key in this process's mailbox (MemStore::setLive): answered by
  // the mailbox's thread from `value()` whenever a rank asks for it.
  void setLive(const std::string& key, std::function<std::vector<uint8_t>()> value);
  void removeLive(const std::string& key);
  // Keys held in this process's mailbox (tests: garbage must not grow).
  size_t heldKeys() const;
  // Communicator membership, for garbage collection: once the last member of
  // a communicator in this process leaves, its keys here are erased.
  void join(const std::string& prefix);
  void leave(const std::string& prefix);

 private:
  Mesh(wire::Secret secret, SockAddr addr, std::shared_ptr<TcpStoreServer> server, std::shared_ptr<Store> local);

  const wire::Secret secret_;
  const SockAddr addr_;
  std::shared_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> local_;
  mutable std::mutex mu_;  // guards the maps below
  std::map<std::string, std::shared_ptr<Store>> peers_;
  std::map<std::string, int> members_;
  std::set<std::string> gone_;
};

// Keys held by this process's mailbox for `secret`, or 0 if it has none.
size_t meshHeldKeys(const wire::Secret& secret);

}  // namespace chorus
