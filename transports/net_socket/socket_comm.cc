// Control-stream progress of a socket connection. Messages are handled
// strictly in posting order: the control stage of message k+1 starts only
// once message k's header (and inline payload) has moved, and the receiver
// expects headers in the order its receives were posted.
#include "transports/net_socket/socket_comm.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/params.h"
#include "core/result.h"

namespace chorus::sock {

SocketComm::SocketComm(bool send, SharedFd ctrl, std::vector<ForkClosedFd> data, uint32_t nthreads, uint32_t nsocks,
                       std::string remote, ConnIdentity identity)
    : send_(send),
      identity_(identity),
      ownCtrl_(std::move(ctrl)),
      ctrl_(ownCtrl_),
      data_(std::move(data)),
      remote_(std::move(remote)) {
  int64_t inlineBytes = params::socketInlineBytes();
  inlineBytes_ = inlineBytes < 0 ? 0 : static_cast<size_t>(inlineBytes);
  if (!data_.empty()) helpers_ = std::make_unique<StreamHelpers>(this, send, nthreads, nsocks);
  if (!send_) stage_ = std::make_unique<char[]>(kStageBytes);
  if (send_)
    mayMove_ = params::socketShareConnections() != 0 && mayEverMove(identity_);  // connectTo registered the socket
  else
    registerAccepted(identity_.connId, identity_.peerToken, ownCtrl_);
}

SocketComm::~SocketComm() {
  if (send_) {
    // The socket may outlive this comm (retired, socket_pairing.h): end this
    // direction now, so a receiver still in a message sees the stream end.
    if (ownCtrl_->valid()) shutdown(ownCtrl_->get(), SHUT_WR);
    retireConnected(identity_.connId, ownCtrl_);
  } else {
    unregisterAccepted(identity_.connId);
  }
  // Wake helpers blocked in poll() at once, then join them before the
  // requests their parts point into go away.
  for (ForkClosedFd& fd : data_) shutdown(fd.get(), SHUT_RDWR);
  if (helpers_) helpers_->stop();
}

void SocketComm::setError(const std::string& message, bool orderly) {
  std::lock_guard<std::mutex> lock(errorMu_);
  if (errorState_.load(std::memory_order_relaxed) != 0) return;
  errorMessage_ = message;
  errorState_.store(orderly ? 2 : 1, std::memory_order_release);
}

ncclResult_t SocketComm::reportError() {
  std::lock_guard<std::mutex> lock(errorMu_);
  if (errorState_.load(std::memory_order_relaxed) == 2)
    return failQuiet(ncclRemoteError, kLogNet, "%s", errorMessage_.c_str());
  return fail(ncclRemoteError, "%s", errorMessage_.c_str());
}

void SocketComm::streamError(const char* what, int err) {
  setError("socket: connection " + std::string(send_ ? "to " : "from ") + remote_ + " broken (" + what + "): " +
               (err == 0 ? "closed by the peer without an orderly goodbye (peer process died?)" : strerror(err)),
           false);
}

ncclResult_t SocketComm::post(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  if (failed()) return reportError();
  auto req = std::make_unique<Request>();
  req->comm = this;
  req->send = send_;
  req->data = static_cast<char*>(data);
  req->capacity = size;
  req->tag = static_cast<uint32_t>(tag);
  if (send_) {
    req->size = size;
    req->header.tag = req->tag;
    req->header.size = size;
    req->header.flags = (data_.empty() || size <= inlineBytes_) ? kHeaderInline : 0;
  }
  return queue(std::move(req), request);
}

ncclResult_t SocketComm::postGather(const void* prefix, size_t prefixBytes, const void* data, size_t size, int tag,
                                    void** request) {
  *request = nullptr;
  if (!gathers()) return fail(ncclInternalError, "socket: connection to %s cannot gather a send", remote_.c_str());
  if (failed()) return reportError();
  auto req = std::make_unique<Request>();
  req->comm = this;
  req->send = true;
  req->prefix = static_cast<const char*>(prefix);
  req->prefixBytes = prefixBytes;
  req->data = static_cast<char*>(const_cast<void*>(data));  // only read
  req->size = req->capacity = prefixBytes + size;
  req->tag = static_cast<uint32_t>(tag);
  req->header.tag = req->tag;
  req->header.size = req->size;
  req->header.flags = kHeaderInline;
  return queue(std::move(req), request);
}

ncclResult_t SocketComm::postLanding(void* data, size_t size, int tag, size_t prefixBytes,
                                     char* (*land)(void* arg, const char* prefix, size_t messageBytes), void* landArg,
                                     void** request) {
  *request = nullptr;
  if (send_) return fail(ncclInternalError, "socket: a landing receive on a send connection to %s", remote_.c_str());
  if (failed()) return reportError();
  auto req = std::make_unique<Request>();
  req->comm = this;
  req->data = static_cast<char*>(data);
  req->capacity = size;
  req->tag = static_cast<uint32_t>(tag);
  req->prefixBytes = prefixBytes;
  req->land = land;
  req->landArg = landArg;
  return queue(std::move(req), request);
}

ncclResult_t SocketComm::queue(std::unique_ptr<Request> req, void** request) {
  if (mayMove_ && ctrlQueue_.empty()) tryMove();  // at a message boundary
  Request* raw = req.get();
  live_.push_back(std::move(req));
  raw->self = std::prev(live_.end());
  ctrlQueue_.push_back(raw);
  if (send_) progress();  // small messages usually leave right here; receives are looked for by test()
  *request = raw;
  return ncclSuccess;
}

// Send side, between messages: moves onto an accepted connection's reverse
// direction when one from the same peer process is free (socket_pairing.h),
// by queueing the MOVED header; the messages behind it follow on that socket.
void SocketComm::tryMove() {
  const uint64_t generation = acceptedGeneration();
  if (generation == claimGeneration_) return;  // nothing new to claim since the last try
  uint64_t targetId = 0;
  SharedFd target = claimReverse(identity_, &targetId);
  if (!target) {
    claimGeneration_ = generation;
    return;
  }
  mayMove_ = false;
  auto marker = std::make_unique<Request>();
  marker->comm = this;
  marker->send = true;
  marker->header = MessageHeader{0, kHeaderMoved | kHeaderInline, targetId};
  marker->movesTo = std::move(target);
  Request* raw = marker.get();
  live_.push_back(std::move(marker));
  raw->self = std::prev(live_.end());
  ctrlQueue_.push_back(raw);
}

ncclResult_t SocketComm::test(Request* req, int* done, size_t* size) {
  *done = 0;
  if (req->reportedPending) foundDrained_ = false;  // a waiter looks again: ask the socket
  progress();
  if (req->ctrlFinished && req->partsLeft.load(std::memory_order_acquire) == 0) {
    if (req->partFailed.load(std::memory_order_relaxed)) return reportError();
    *done = 1;
    if (size != nullptr) *size = req->size;
    live_.erase(req->self);
    return ncclSuccess;
  }
  if (failed()) return reportError();
  req->reportedPending = true;
  return ncclSuccess;
}

void SocketComm::progress() {
  while (!ctrlQueue_.empty() && !failed()) {
    Request& r = *ctrlQueue_.front();
    if (!(r.send ? stepSend(r) : stepRecv(r))) return;
    r.ctrlFinished = true;
    ctrlQueue_.pop_front();
    if (r.movesTo) {  // the MOVED header is out: from here on, the other socket
      ctrl_ = std::move(r.movesTo);
      live_.erase(r.self);
    }
  }
}

void SocketComm::dispatchParts(Request& r) {
  const auto nparts = static_cast<uint32_t>(data_.size());
  int nonEmpty = 0;
  for (uint32_t i = 0; i < nparts; ++i) {
    size_t off = 0, bytes = 0;
    splitMessage(r.size, nparts, i, &off, &bytes);
    if (bytes > 0) ++nonEmpty;
  }
  r.partsLeft.store(nonEmpty, std::memory_order_release);
  for (uint32_t i = 0; i < nparts; ++i) {
    size_t off = 0, bytes = 0;
    splitMessage(r.size, nparts, i, &off, &bytes);
    if (bytes > 0) helpers_->queue(i, Part{&r, r.data + off, bytes, 0});
  }
}

namespace {
// The iovecs of a send's payload (prefix, then data) from its byte `from` on.
int payloadIov(const Request& r, size_t from, iovec* iov) {
  int n = 0;
  if (from < r.prefixBytes) {
    iov[n++] = {const_cast<char*>(r.prefix) + from, r.prefixBytes - from};
    from = r.prefixBytes;
  }
  const size_t dataFrom = from - r.prefixBytes, dataBytes = r.size - r.prefixBytes;
  if (dataFrom < dataBytes) iov[n++] = {r.data + dataFrom, dataBytes - dataFrom};
  return n;
}
}  // namespace

bool SocketComm::stepSend(Request& r) {
  const bool isInline = (r.header.flags & kHeaderInline) != 0;
  if (r.ctrlDone == 0 && isInline && moved() && r.size > kSharedPayloadMax) r.header.flags |= kHeaderPayloadOwn;
  const bool payloadOwn = (r.header.flags & kHeaderPayloadOwn) != 0;
  const size_t total = sizeof(MessageHeader) + (isInline ? r.size : 0);
  while (r.ctrlDone < total) {
    const bool inHeader = r.ctrlDone < sizeof(MessageHeader);
    iovec iov[3];
    int n = 0;
    if (inHeader) iov[n++] = {reinterpret_cast<char*>(&r.header) + r.ctrlDone, sizeof(MessageHeader) - r.ctrlDone};
    if (isInline && r.size > 0 && !(payloadOwn && inHeader)) {
      const size_t payloadDone = r.ctrlDone > sizeof(MessageHeader) ? r.ctrlDone - sizeof(MessageHeader) : 0;
      n += payloadIov(r, payloadDone, iov + n);
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    const int fd = payloadOwn && !inHeader ? ownCtrl_->get() : ctrl_->get();
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      r.ctrlDone += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    streamError("control stream", w < 0 ? errno : EPIPE);
    return false;
  }
  if (!isInline) dispatchParts(r);
  return true;
}

// Receive side: a MOVED header. The rest of the connection's messages come on
// the socket this process connected under the header's id; bytes the stage
// holds past the header came from the own stream after the move, the start
// of payloads that keep to it (kHeaderPayloadOwn).
bool SocketComm::followMove(Request& r) {
  SharedFd target = connectedSocket(r.header.size);
  if (!target) {
    setError("socket: connection from " + remote_ + " moved onto a connection this process lacks", false);
    return false;
  }
  ownAhead_.assign(stage_.get() + stageHead_, stage_.get() + stageTail_);
  ownAheadHead_ = 0;
  stageHead_ = stageTail_ = 0;
  ctrl_ = std::move(target);
  r.ctrlDone = 0;
  r.header = MessageHeader{};
  foundDrained_ = false;
  return true;
}

// Validates a complete header; false (with the error recorded) if it cannot be taken.
bool SocketComm::acceptHeader(Request& r) {
  if (r.header.flags & kHeaderGoodbye) {
    setError("socket: connection from " + remote_ + " closed by the peer", true);
    return false;
  }
  if (r.header.tag != r.tag) {
    setError("socket: connection from " + remote_ + ": message with tag " + std::to_string(r.header.tag) +
                 " arrived while the oldest posted receive expects tag " + std::to_string(r.tag) +
                 " (sends and receives must be posted in the same order)",
             false);
    return false;
  }
  if (r.header.size > r.capacity) {
    setError("socket: connection from " + remote_ + ": " + std::to_string(r.header.size) + "-byte message for a " +
                 std::to_string(r.capacity) + "-byte receive",
             false);
    return false;
  }
  if (!(r.header.flags & kHeaderInline) && data_.empty()) {
    setError("socket: connection from " + remote_ + ": peer split a message over data streams this side lacks", false);
    return false;
  }
  r.size = r.header.size;
  return true;
}

bool SocketComm::stepRecv(Request& r) {
  for (;;) {
    char* dst = nullptr;
    size_t want = 0;
    if (r.ctrlDone < sizeof(MessageHeader)) {
      dst = reinterpret_cast<char*>(&r.header) + r.ctrlDone;
      want = sizeof(MessageHeader) - r.ctrlDone;
    } else {
      if (!r.headerAccepted && (r.header.flags & kHeaderMoved) != 0) {
        if (!followMove(r)) return false;
        continue;
      }
      if (!r.headerAccepted) {
        if (!acceptHeader(r)) return false;
        r.headerAccepted = true;
      }
      if (!(r.header.flags & kHeaderInline)) {
        dispatchParts(r);
        return true;
      }
      const size_t payloadDone = r.ctrlDone - sizeof(MessageHeader);
      if (payloadDone == r.size) return true;
      payloadTarget(r, payloadDone, &dst, &want);
    }
    const bool payloadOwn = (r.header.flags & kHeaderPayloadOwn) != 0;
    ssize_t got = payloadOwn ? readOwn(dst, want) : readControl(dst, want);
    if (got > 0) {
      r.ctrlDone += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    streamError("control stream", got < 0 ? errno : 0);
    return false;
  }
}

// Where an inline payload's bytes from `done` on go: the receive's buffer,
// or past its prefix where land() put them (asked before the first byte).
void SocketComm::payloadTarget(Request& r, size_t done, char** dst, size_t* want) {
  if (r.land != nullptr && !r.landAsked) {
    if (done < r.prefixBytes && r.size > r.prefixBytes) {  // the prefix first: land() looks at it
      *dst = r.data + done;
      *want = r.prefixBytes - done;
      return;
    }
    r.landAsked = true;
    if (r.size > r.prefixBytes) r.landed = r.land(r.landArg, r.data, r.size);
  }
  if (r.landed == nullptr || done < r.prefixBytes) {
    *dst = r.data + done;
    *want = (r.landed == nullptr ? r.size : r.prefixBytes) - done;
  } else {
    *dst = r.landed + (done - r.prefixBytes);
    *want = r.size - done;
  }
}

// Up to `want` bytes of the control stream into dst: what the stage holds,
// else one recv of a whole stage (copied out) or, for a large remainder,
// straight into dst. Returns what recv would (errno set when negative); a
// stream found drained answers EAGAIN without asking (foundDrained_).
ssize_t SocketComm::readControl(char* dst, size_t want) {
  if (stageTail_ == stageHead_) {
    if (foundDrained_) {
      errno = EAGAIN;
      return -1;
    }
    const bool staged = want < kStageBytes;
    char* into = staged ? stage_.get() : dst;
    const size_t ask = staged ? kStageBytes : want;
    const ssize_t got = recv(ctrl_->get(), into, ask, MSG_DONTWAIT);
    ++controlRecvs_;
    // A staged read that came back short took all the stream held; a large
    // read straight into dst goes on until the stream says EAGAIN (its
    // sender is usually still writing).
    foundDrained_ =
        (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) || (staged && got > 0 && static_cast<size_t>(got) < ask);
    if (!staged || got <= 0) return got;
    stageHead_ = 0;
    stageTail_ = static_cast<size_t>(got);
  }
  const size_t n = std::min(want, stageTail_ - stageHead_);
  std::memcpy(dst, stage_.get() + stageHead_, n);
  stageHead_ += n;
  return static_cast<ssize_t>(n);
}

// Up to `want` bytes of a payload on the own stream after a move: what the
// stage read ahead of the move first, then the socket.
ssize_t SocketComm::readOwn(char* dst, size_t want) {
  if (ownAheadHead_ < ownAhead_.size()) {
    const size_t n = std::min(want, ownAhead_.size() - ownAheadHead_);
    std::memcpy(dst, ownAhead_.data() + ownAheadHead_, n);
    ownAheadHead_ += n;
    return static_cast<ssize_t>(n);
  }
  return recv(ownCtrl_->get(), dst, want, MSG_DONTWAIT);
}

void SocketComm::pollFd(int* fd, short* events) const {
  *fd = -1;
  *events = 0;
  if (failed() || ctrlQueue_.empty()) return;
  const Request& r = *ctrlQueue_.front();
  const bool onOwn = (r.header.flags & kHeaderPayloadOwn) != 0 && r.ctrlDone >= sizeof(MessageHeader);
  *fd = onOwn ? ownCtrl_->get() : ctrl_->get();
  *events = send_ ? POLLOUT : POLLIN;
}

void SocketComm::sayGoodbye() {
  if (!send_ || failed()) return;
  for (Request* r : ctrlQueue_)
    if (r->ctrlDone != 0) return;  // mid-message: the receiver will see the stream end instead
  MessageHeader bye{0, kHeaderGoodbye, 0};
  (void)send(ctrl_->get(), &bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace chorus::sock
