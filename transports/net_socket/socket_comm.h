// One socket-backend connection (either direction): its control stream, its
// data streams with their helper threads, and the messages in flight.
//
// Threading: the owner (the net proxy) calls post/test/close; helper threads
// touch only the parts queued to them and the error record. Requests live in
// the comm until test() reports them done (then they are freed) or the comm
// is closed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "nccl.h"
#include "transports/net_socket/socket_pairing.h"
#include "transports/net_socket/socket_wire.h"

namespace chorus::sock {

class SocketComm;

struct Request {
  SocketComm* comm = nullptr;
  bool send = false;
  char* data = nullptr;
  size_t capacity = 0;  // receive: the posted size; send: the message size
  // Send: bytes that go in front of `data` in the same message (postGather);
  // `size` counts them. Only on the control stream.
  const char* prefix = nullptr;
  size_t prefixBytes = 0;
  // Receive (postLanding): past its first prefixBytes, an inline payload
  // goes where land() says once the prefix is in (null: into data).
  char* (*land)(void* arg, const char* prefix, size_t messageBytes) = nullptr;
  void* landArg = nullptr;
  char* landed = nullptr;
  bool landAsked = false;
  uint32_t tag = 0;
  MessageHeader header{};
  size_t ctrlDone = 0;          // bytes of header (+ inline payload) moved on the control stream
  bool headerAccepted = false;  // receive: header validated
  bool ctrlFinished = false;
  bool reportedPending = false;  // test() said "not done" at least once
  size_t size = 0;               // bytes of the message (receive: known once the header arrived)
  SharedFd movesTo;              // send: a MOVED header; once sent, the control stream is this socket
  std::atomic<int> partsLeft{0};
  std::atomic<bool> partFailed{false};
  std::list<std::unique_ptr<Request>>::iterator self;
};

// A contiguous piece of one large message on one data stream.
struct Part {
  Request* req = nullptr;
  char* data = nullptr;
  size_t bytes = 0;
  size_t done = 0;
};

// nthreads threads; thread t owns data streams [t*nsocks, (t+1)*nsocks) and
// moves the parts queued on them with non-blocking I/O, sleeping in poll()
// while its sockets are not ready and on a condition variable while it has
// nothing queued.
class StreamHelpers {
 public:
  StreamHelpers(SocketComm* comm, bool send, uint32_t nthreads, uint32_t nsocks);
  ~StreamHelpers();
  StreamHelpers(const StreamHelpers&) = delete;
  StreamHelpers& operator=(const StreamHelpers&) = delete;
  void queue(uint32_t stream, const Part& part);
  // Stops and joins the threads (parts still queued are abandoned).
  void stop();

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::deque<Part>> queues;  // one per owned stream
    uint32_t firstStream = 0;
    std::thread thread;
  };
  void run(Worker& w);
  bool moveOne(Worker& w, uint32_t local);  // true when bytes moved or a part ended
  void finishPart(Worker& w, uint32_t local, bool ok);
  void waitReady(Worker& w);

  SocketComm* comm_;
  bool send_;
  uint32_t nsocks_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Worker>> workers_;
};

class SocketComm {
 public:
  // A send side's control socket is registered by connectTo (socket_pairing.h).
  SocketComm(bool send, SharedFd ctrl, std::vector<ForkClosedFd> data, uint32_t nthreads, uint32_t nsocks,
             std::string remote, ConnIdentity identity);
  ~SocketComm();
  SocketComm(const SocketComm&) = delete;
  SocketComm& operator=(const SocketComm&) = delete;

  ncclResult_t post(void* data, size_t size, int tag, void** request);
  // Sends `prefix` and `data` as one message, as if they were contiguous;
  // possible where gathers() (no data streams, so the message goes on the
  // control stream).
  ncclResult_t postGather(const void* prefix, size_t prefixBytes, const void* data, size_t size, int tag,
                          void** request);
  bool gathers() const { return send_ && data_.empty(); }
  // A receive whose payload past `prefixBytes` may land elsewhere (Request::land).
  ncclResult_t postLanding(void* data, size_t size, int tag, size_t prefixBytes,
                           char* (*land)(void* arg, const char* prefix, size_t messageBytes), void* landArg,
                           void** request);
  ncclResult_t test(Request* req, int* done, size_t* size);
  // The control stream while a message waits on it (-1 otherwise); data
  // streams are watched by the helpers, which kick the proxy (net_wake.h).
  void pollFd(int* fd, short* events) const;
  // Best effort: tells the receiver no message follows (skipped mid-message).
  void sayGoodbye();

  // First error wins. `orderly`: the peer closed on purpose (logged at INFO).
  void setError(const std::string& message, bool orderly);
  bool failed() const { return errorState_.load(std::memory_order_acquire) != 0; }
  int dataFd(uint32_t stream) const { return data_[stream].get(); }
  // recv calls made on the control stream so far (receive side).
  uint64_t controlRecvs() const { return controlRecvs_; }
  const std::string& remote() const { return remote_; }
  // Whether this connection's messages travel on another connection's socket
  // (socket_pairing.h): a send side that sent its MOVED header, a receive
  // side that read it.
  bool moved() const { return ctrl_ != ownCtrl_; }

 private:
  ncclResult_t reportError();
  ncclResult_t queue(std::unique_ptr<Request> req, void** request);
  void progress();
  bool stepSend(Request& r);  // true when the control stage finished
  bool stepRecv(Request& r);
  bool acceptHeader(Request& r);
  static void payloadTarget(Request& r, size_t done, char** dst, size_t* want);
  ssize_t readControl(char* dst, size_t want);
  ssize_t readOwn(char* dst, size_t want);
  void dispatchParts(Request& r);
  void streamError(const char* what, int err);
  void tryMove();
  bool followMove(Request& r);

  bool send_;
  ConnIdentity identity_;
  SharedFd ownCtrl_;  // this connection's control stream
  SharedFd ctrl_;     // where its messages travel: ownCtrl_, or after a move another connection's socket
  // Send side: whether a move is still to be tried, and the accepted
  // connections' generation when the last claim found nothing.
  bool mayMove_ = false;
  uint64_t claimGeneration_ = ~uint64_t(0);
  std::vector<ForkClosedFd> data_;
  std::string remote_;
  size_t inlineBytes_;
  std::unique_ptr<StreamHelpers> helpers_;
  std::list<std::unique_ptr<Request>> live_;
  std::deque<Request*> ctrlQueue_;  // requests whose control stage is not finished, in order
  // Receive side: bytes read from the control stream ahead of the request
  // they belong to, so a small message (header and payload) and the headers
  // behind it come in with one recv instead of one per piece.
  static constexpr size_t kStageBytes = 16384;  // an LL slot's message with its headers fits
  std::unique_ptr<char[]> stage_;
  size_t stageHead_ = 0, stageTail_ = 0;
  // Receive side: the last recv on the control stream found it empty or took
  // all it held. Until a request that already reported "not done" is tested
  // again (a waiter's next look), receives are answered from that finding,
  // not with another recv that would come back empty: a completed message,
  // the receive behind it and a receive posted for a freed slot would
  // otherwise cost a system call each while the peer has sent nothing new.
  bool foundDrained_ = false;
  // Receive side, after a move: own-stream bytes the stage had read past the
  // MOVED header (payloads that keep to the own stream), consumed first.
  std::vector<char> ownAhead_;
  size_t ownAheadHead_ = 0;
  uint64_t controlRecvs_ = 0;
  std::atomic<int> errorState_{0};  // 0 healthy, 1 failed, 2 closed by the peer
  std::mutex errorMu_;
  std::string errorMessage_;
};

}  // namespace chorus::sock
