#include "bootstrap/tcp_store_client.h"

#include <poll.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "core/result.h"
#include "core/wait_limit.h"

namespace chorus {
namespace {

using wire::Op;
using wire::Status;

class TcpStoreClient : public Store {
 public:
  TcpStoreClient(ForkClosedFd fd, const SockAddr& server)
      : fd_(std::move(fd)), where_("store server " + server.str()) {}

  ncclResult_t hello(const wire::Secret& secret, int rank, const WaitBound& bound);
  ncclResult_t set(const std::string& key, std::vector<uint8_t> value) override;
  ncclResult_t get(const std::vector<std::string>& keys, std::vector<std::vector<uint8_t>>* values,
                   const WaitBound& bound) override;
  ncclResult_t add(const std::string& key, int64_t delta, int64_t* result) override;
  ncclResult_t erasePrefix(const std::string& prefix) override;

 private:
  struct Reply {
    bool done = false;
    Status status = Status::Ok;
    std::vector<uint8_t> body;  // after the status byte
  };
  enum class End { Answered, Lost, Deadline, Aborted };

  uint32_t newRequest();
  void forget(uint32_t req);
  bool send(const std::vector<uint8_t>& frame);
  // `what` names the awaited answer in the "still waiting" log lines.
  End await(uint32_t req, const WaitBound& bound, Reply* out, const std::string& what);
  void pump(int timeoutMs);
  void markLostLocked(const std::string& why);
  ncclResult_t failLost(const std::string& during);
  ncclResult_t call(std::vector<uint8_t> frame, uint32_t req, const char* what, Reply* out);
  ncclResult_t checkFits(size_t bytes, const std::string& key) const;

  ForkClosedFd fd_;
  const std::string where_;
  std::mutex sendMu_;  // one frame at a time on the wire
  std::mutex mu_;      // everything below
  std::condition_variable cv_;
  bool readerBusy_ = false;
  bool lost_ = false;
  std::string lostWhy_;
  uint32_t nextReq_ = 1;
  std::unordered_map<uint32_t, Reply> replies_;
  std::vector<uint8_t> rx_;  // touched only by the thread holding the reader role
};

uint32_t TcpStoreClient::newRequest() {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t id = nextReq_++;
  replies_[id] = Reply{};
  return id;
}

void TcpStoreClient::forget(uint32_t req) {
  std::lock_guard<std::mutex> lock(mu_);
  replies_.erase(req);
}

void TcpStoreClient::markLostLocked(const std::string& why) {
  if (!lost_) {
    lost_ = true;
    lostWhy_ = why;
  }
  cv_.notify_all();
}

ncclResult_t TcpStoreClient::failLost(const std::string& during) {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = lostWhy_;
  }
  return fail(ncclRemoteError, "bootstrap: lost the connection to %s (%s) %s", where_.c_str(), why.c_str(),
              during.c_str());
}

bool TcpStoreClient::send(const std::vector<uint8_t>& frame) {
  std::lock_guard<std::mutex> sl(sendMu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_) return false;
  }
  // No deadline: a server that went away fails the write (EPIPE, ECONNRESET).
  int err = writeAll(fd_.get(), frame.data(), frame.size(), Clock::time_point::max());
  if (err == 0) return true;
  // A partly written frame leaves the stream unusable whatever the cause.
  std::lock_guard<std::mutex> lock(mu_);
  markLostLocked(err == ETIMEDOUT ? "sending timed out" : std::string("send failed: ") + strerror(err));
  return false;
}

// Reader role: wait up to timeoutMs for bytes, then hand complete replies to their owners.
void TcpStoreClient::pump(int timeoutMs) {
  pollfd p{fd_.get(), POLLIN, 0};
  if (poll(&p, 1, timeoutMs) <= 0) return;
  std::string lostWhy;
  uint8_t buf[65536];
  while (true) {
    ssize_t r = recv(fd_.get(), buf, sizeof(buf), 0);
    if (r > 0) {
      rx_.insert(rx_.end(), buf, buf + r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    lostWhy = r == 0 ? "the server closed the connection" : std::string("receive failed: ") + strerror(errno);
    break;
  }
  // Replies that arrived just before the server closed are still answers.
  std::vector<std::pair<uint32_t, Reply>> got;
  size_t off = 0;
  bool garbled = false;
  while (!garbled && rx_.size() - off >= wire::kHeaderBytes) {
    uint32_t len = wire::readLength(rx_.data() + off);
    if (len > wire::kMaxFrameBytes + 1024 || len < wire::kMinFrameBytes + 1) {
      lostWhy = "protocol error: bad reply length " + std::to_string(len);
      garbled = true;
      break;
    }
    if (rx_.size() - off - wire::kHeaderBytes < len) break;
    wire::Reader r(rx_.data() + off + wire::kHeaderBytes, len);
    uint8_t op = 0, status = 0;
    uint32_t req = 0;
    r.u8(&op);
    r.u32(&req);
    r.u8(&status);
    if (op != static_cast<uint8_t>(Op::Reply)) {
      lostWhy = "protocol error: unexpected frame type " + std::to_string(op);
      garbled = true;
      break;
    }
    const uint8_t* body = rx_.data() + off + wire::kHeaderBytes + wire::kMinFrameBytes + 1;
    Reply rep{true, static_cast<Status>(status), std::vector<uint8_t>(body, body + (len - wire::kMinFrameBytes - 1))};
    got.emplace_back(req, std::move(rep));
    off += wire::kHeaderBytes + len;
  }
  rx_.erase(rx_.begin(), rx_.begin() + static_cast<std::ptrdiff_t>(off));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [req, rep] : got) {
    auto it = replies_.find(req);
    if (it != replies_.end()) it->second = std::move(rep);  // else: a get we gave up on
  }
  if (!lostWhy.empty()) markLostLocked(lostWhy);
  cv_.notify_all();
}

TcpStoreClient::End TcpStoreClient::await(uint32_t req, const WaitBound& bound, Reply* out, const std::string& what) {
  WaitProgress progress;
  std::unique_lock<std::mutex> lk(mu_);
  while (true) {
    auto it = replies_.find(req);
    if (it != replies_.end() && it->second.done) {
      *out = std::move(it->second);
      replies_.erase(it);
      return End::Answered;
    }
    if (lost_) return End::Lost;
    if (waitAborted(bound)) return End::Aborted;
    auto now = Clock::now();
    if (now >= bound.deadline) return End::Deadline;
    if (progress.due(now))
      CHORUS_WARN(kLogBootstrap, "bootstrap: still waiting after %lld s for %s from %s", progress.secondsWaited(now),
                  what.c_str(), where_.c_str());
    auto slice = std::min<Clock::duration>(kWaitSlice, bound.deadline - now);
    if (readerBusy_) {
      cv_.wait_for(lk, slice);
      continue;
    }
    readerBusy_ = true;
    lk.unlock();
    pump(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(slice).count()) + 1);
    lk.lock();
    readerBusy_ = false;
    cv_.notify_all();  // someone else may take the reader role
  }
}

ncclResult_t TcpStoreClient::checkFits(size_t bytes, const std::string& key) const {
  if (bytes + 64 <= wire::kMaxFrameBytes) return ncclSuccess;
  return fail(ncclInvalidArgument, "bootstrap: request of %zu bytes for key '%s' exceeds the store's %u-byte limit",
              bytes, key.c_str(), wire::kMaxFrameBytes);
}

// Sends a request that the server answers at once and waits for the answer:
// without a deadline (a lost connection ends the wait), logging every 30 s.
ncclResult_t TcpStoreClient::call(std::vector<uint8_t> frame, uint32_t req, const char* what, Reply* out) {
  if (!send(frame)) {
    forget(req);
    return failLost(std::string("sending a ") + what + " request");
  }
  switch (await(req, WaitBound{Clock::time_point::max(), nullptr, {}}, out,
                std::string("the answer to a ") + what + " request")) {
    case End::Answered:
      break;
    case End::Lost:
      forget(req);
      return failLost(std::string("waiting for the answer to a ") + what + " request");
    default:
      forget(req);
      return fail(ncclInternalError, "bootstrap: the wait for %s's answer to a %s request ended without one",
                  where_.c_str(), what);
  }
  if (out->status == Status::Error) {
    wire::Reader r(out->body.data(), out->body.size());
    std::string msg;
    r.str(&msg);
    return fail(ncclInvalidUsage, "bootstrap: %s refused a %s request: %s", where_.c_str(), what, msg.c_str());
  }
  if (out->status != Status::Ok)
    return fail(ncclRemoteError, "bootstrap: %s sent an unexpected answer to a %s request", where_.c_str(), what);
  return ncclSuccess;
}

ncclResult_t TcpStoreClient::hello(const wire::Secret& secret, int rank, const WaitBound& bound) {
  uint32_t req = newRequest();
  auto frame = wire::Writer(Op::Hello, req)
                   .u32(wire::kMagic)
                   .u16(wire::kVersion)
                   .raw(secret.data(), secret.size())
                   .u32(static_cast<uint32_t>(rank))
                   .finish();
  Reply rep;
  End e = send(frame) ? await(req, bound, &rep, "the handshake answer") : End::Lost;
  forget(req);
  if (e == End::Lost)
    return fail(ncclRemoteError,
                "bootstrap: %s closed the connection during the handshake (wrong secret: is the unique id from "
                "another job, or is something else listening there?)",
                where_.c_str());
  if (e != End::Answered)
    return fail(ncclRemoteError, "bootstrap: %s %s during the handshake", where_.c_str(),
                e == End::Aborted ? "aborted" : "did not answer in time");
  wire::Reader r(rep.body.data(), rep.body.size());
  uint32_t magic = 0;
  if (rep.status != Status::Ok || !r.u32(&magic) || magic != wire::kMagic)
    return fail(ncclRemoteError, "bootstrap: %s answered the handshake with something unexpected", where_.c_str());
  return ncclSuccess;
}

ncclResult_t TcpStoreClient::set(const std::string& key, std::vector<uint8_t> value) {
  CHORUS_CHECK(checkFits(key.size() + value.size(), key));
  uint32_t req = newRequest();
  Reply rep;
  return call(wire::Writer(Op::Set, req).str(key).bytes(value).finish(), req, "set", &rep);
}

ncclResult_t TcpStoreClient::add(const std::string& key, int64_t delta, int64_t* result) {
  CHORUS_CHECK(checkFits(key.size(), key));
  uint32_t req = newRequest();
  Reply rep;
  CHORUS_CHECK(call(wire::Writer(Op::Add, req).str(key).i64(delta).finish(), req, "add", &rep));
  wire::Reader r(rep.body.data(), rep.body.size());
  if (!r.i64(result)) return fail(ncclRemoteError, "bootstrap: %s sent a malformed add answer", where_.c_str());
  return ncclSuccess;
}

ncclResult_t TcpStoreClient::erasePrefix(const std::string& prefix) {
  CHORUS_CHECK(checkFits(prefix.size(), prefix));
  uint32_t req = newRequest();
  Reply rep;
  return call(wire::Writer(Op::ErasePrefix, req).str(prefix).finish(), req, "erase", &rep);
}

ncclResult_t TcpStoreClient::get(const std::vector<std::string>& keys, std::vector<std::vector<uint8_t>>* values,
                                 const WaitBound& bound) {
  const auto started = Clock::now();
  const std::string first = keys.empty() ? std::string() : keys.front();
  uint32_t req = newRequest();
  wire::Writer w(Op::Get, req);
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  if (w.size() + 64 > wire::kMaxFrameBytes) {
    forget(req);
    return checkFits(w.size(), first);
  }
  if (!send(w.finish())) {
    forget(req);
    return failLost("sending a get of key '" + first + "'");
  }
  Reply rep;
  const std::string awaited =
      "key '" + first + "'" + (keys.size() > 1 ? " (and " + std::to_string(keys.size() - 1) + " more)" : "");
  End e = await(req, bound, &rep, awaited);
  if (e == End::Deadline || e == End::Aborted) {
    // Ask the server to drop the parked get and say which key it still lacked;
    // the values may also have arrived just now, in which case we take them.
    bool aborted = e == End::Aborted;
    if (send(wire::Writer(Op::Cancel, 0).u32(req).finish()))
      e = await(req, waitBoundAfter(1000), &rep, "the answer to a cancel");
    if (e == End::Answered && rep.status == Status::Cancelled) {
      wire::Reader r(rep.body.data(), rep.body.size());
      uint32_t missing = 0;
      std::string name;
      r.u32(&missing);
      r.str(&name);
      return failStoreWait(aborted, started, name, missing, keys.size(), where_);
    }
    if (e != End::Answered && e != End::Lost) {
      forget(req);
      return failStoreWait(aborted, started, first, keys.size(), keys.size(), where_);
    }
  }
  if (e == End::Lost) {
    forget(req);
    return failLost("while waiting for key '" + first + "'");
  }
  wire::Reader r(rep.body.data(), rep.body.size());
  uint32_t n = 0;
  if (rep.status != Status::Ok || !r.u32(&n) || n != keys.size())
    return fail(ncclRemoteError, "bootstrap: %s sent a malformed get answer", where_.c_str());
  values->assign(n, {});
  for (uint32_t i = 0; i < n; ++i)
    if (!r.bytes(&(*values)[i]))
      return fail(ncclRemoteError, "bootstrap: %s sent a malformed get answer", where_.c_str());
  return ncclSuccess;
}

const char* connectErrorText(int err) { return err == 0 ? "none" : strerror(err); }

}  // namespace

ncclResult_t connectTcpStore(const SockAddr& addr, const wire::Secret& secret, int rank, const WaitBound& bound,
                             std::shared_ptr<Store>* store, int64_t refusedForMs) {
  const auto started = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  int lastErr = 0;
  ForkClosedFd fd;
  WaitProgress progress(started);
  while (true) {
    if (progress.due())
      CHORUS_WARN(kLogBootstrap,
                  "bootstrap: rank %d still trying to reach store server %s after %lld s (last error: %s)", rank,
                  addr.str().c_str(), progress.secondsWaited(), connectErrorText(lastErr));
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    if (waitAborted(bound))
      return fail(ncclRemoteError, "bootstrap: aborted after %lld ms while connecting to store server %s",
                  static_cast<long long>(elapsed), addr.str().c_str());
    if (Clock::now() >= bound.deadline)
      return fail(ncclRemoteError,
                  "bootstrap: timed out after %lld ms connecting to store server %s (last error: %s); is the process "
                  "that created the unique id (or rank 0 under NCCL_COMM_ID) running?",
                  static_cast<long long>(elapsed), addr.str().c_str(), connectErrorText(lastErr));
    int err = connectOnce(addr, bound, &fd);
    if (err == 0) break;
    if (err == ETIMEDOUT || err == ECANCELED) continue;  // the checks above report it
    if (!connectRetryable(err))
      return fail(ncclSystemError, "bootstrap: cannot connect to store server %s: %s", addr.str().c_str(),
                  strerror(err));
    if (refusedForMs >= 0 && elapsed >= refusedForMs)
      return fail(ncclRemoteError, "bootstrap: nothing listens at %s any more (%s for %lld ms)", addr.str().c_str(),
                  strerror(err), static_cast<long long>(elapsed));
    lastErr = err;
    // Nobody listens yet (the serving rank may still be starting): back off and retry.
    auto until = std::min(Clock::now() + backoff, bound.deadline);
    while (Clock::now() < until && !waitAborted(bound))
      std::this_thread::sleep_for(std::min<Clock::duration>(kWaitSlice, until - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  auto client = std::make_shared<TcpStoreClient>(std::move(fd), addr);
  CHORUS_CHECK(client->hello(secret, rank, bound));
  CHORUS_TRACE(kLogBootstrap, "bootstrap: rank %d connected to store server %s", rank, addr.str().c_str());
  *store = std::move(client);
  return ncclSuccess;
}

}  // namespace chorus
