// The store server: one thread, poll() over non-blocking sockets, serving the
// data of a MemStore to remote ranks. A get whose keys are not there yet is
// parked as a MemStore watch; when the keys arrive (from a remote set or from an
// in-process user of the same MemStore) the watch posts the values to the
// server's mailbox and a byte on a pipe wakes poll() to send the reply.
//
// Connections that do not behave (no valid hello in time, wrong secret, garbage,
// oversized frames, a half-sent frame that stalls) are logged at WARN and
// closed; nothing a client sends can stop the server or disturb other clients.
//
// The server counts its clients: authenticated TCP connections plus in-process
// handles from attachLocal(). Once it has had a client and the count drops back
// to zero it stops listening and its thread ends.
//
// The serving process may exit as soon as its own ranks are done (rank 0 under
// NCCL_COMM_ID returns from ncclCommDestroy and exits), while remote ranks still
// collect the answer to their last request or are about to send it. So when the
// last in-process handle goes away and remote clients remain, its destructor
// lingers: until they disconnect, or the server has nothing in flight and has
// heard nothing from them for lingerIdleMs, or lingerMaxMs has passed.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "bootstrap/mem_store.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

namespace chorus {

class TcpStoreServer : public std::enable_shared_from_this<TcpStoreServer> {
 public:
  struct Options {
    int64_t stallMs = 5000;  // hello deadline and half-frame stall limit
    uint32_t maxFrameBytes = wire::kMaxFrameBytes;
    int64_t lingerIdleMs = 1000;  // quiet time after which remote clients are left alone
    int64_t lingerMaxMs = 20000;  // upper bound on lingering
  };

  // Listens on `addr` (port 0: ephemeral) and starts the serving thread.
  static ncclResult_t start(const SockAddr& addr, const wire::Secret& secret, const Options& opts,
                            std::shared_ptr<TcpStoreServer>* out);
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  const SockAddr& address() const { return addr_; }
  // A Store over the served data for ranks in this process, counted as a client
  // until it is destroyed. nullptr once the server has begun shutting down.
  std::shared_ptr<Store> attachLocal();
  // Stops serving now (tests, teardown): the thread closes every connection and
  // exits. In-process handles keep working on the data. The serving thread holds
  // a reference, so dropping the last shared_ptr does not stop a running server.
  void stop();
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  uint64_t refusedConnections() const { return refused_.load(std::memory_order_relaxed); }
  // Requests answered for TCP clients (hellos included): the root's work.
  uint64_t requestsServed() const { return served_.load(std::memory_order_relaxed); }
  int tcpClients() const;
  MemStore& data() { return *data_; }

 private:
  struct Conn;
  struct Mailbox;
  class LocalHandle;

  TcpStoreServer(const wire::Secret& secret, const Options& opts);
  void run();
  int pollTimeoutMs(Clock::time_point now) const;
  void acceptAll();
  void readFrom(Conn& c);
  void parseFrames(Conn& c);
  void handleFrame(Conn& c, const uint8_t* p, size_t n);
  void handleHello(Conn& c, uint8_t op, uint32_t req, wire::Reader& r);
  void handleGet(Conn& c, uint32_t req, wire::Reader& r);
  void handleCancel(Conn& c, wire::Reader& r);
  void reply(Conn& c, std::vector<uint8_t> frame);
  void flush(Conn& c);
  void refuse(Conn& c, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  void deliverReady();
  void checkStalls(Clock::time_point now);
  void reapDead();
  bool shouldExit();
  void releaseLocal();
  void lingerForRemoteClients();
  void noteRemoteActivity();

  SockAddr addr_;
  const wire::Secret secret_;
  const Options opts_;
  const pid_t pid_;
  ForkClosedFd listenFd_;
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<MemStore> data_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;  // server thread only
  uint64_t nextConn_ = 1;
  Clock::time_point acceptPausedUntil_{};  // server thread only

  mutable std::mutex mu_;  // guards the client counts and activity below
  int localClients_ = 0;
  int tcpClients_ = 0;
  bool hadClients_ = false;
  bool closing_ = false;
  bool busy_ = false;                   // the thread is handling events or has unsent replies
  Clock::time_point lastRemoteFrame_{};  // last bytes from an authenticated client
  std::atomic<bool> finished_{false};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> served_{0};
};

}  // namespace chorus
