#include "bootstrap/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/exception_guard.h"
#include "core/result.h"

namespace chorus {

using wire::Op;
using wire::Status;

struct TcpStoreServer::Conn {
  uint64_t id = 0;
  ForkClosedFd fd;
  std::string peer;
  int rank = -1;
  bool authed = false;
  bool dead = false;
  Clock::time_point opened, lastRecv;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t outOff = 0;
  std::unordered_map<uint32_t, uint64_t> watches;  // request id -> MemStore watch
};

// Where watches deliver completed gets, possibly from other threads. Owned
// jointly by the server and every outstanding watch callback so that a
// callback racing with shutdown never touches a closed descriptor.
struct TcpStoreServer::Mailbox {
  struct Ready {
    uint64_t conn;
    uint32_t req;
    MemStore::Values values;
  };
  std::mutex mu;
  std::vector<Ready> items;
  bool stop = false;
  ForkClosedFd rd, wr;
  pid_t pid = getpid();

  ncclResult_t init() {
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
      return fail(ncclSystemError, "bootstrap: pipe2 failed: %s", strerror(errno));
    rd = ForkClosedFd(p[0]);
    wr = ForkClosedFd(p[1]);
    return ncclSuccess;
  }
  void wake() {
    if (getpid() != pid) return;  // a forked child's copy: the pipe is not ours
    uint8_t b = 1;
    ssize_t w = write(wr.get(), &b, 1);  // a full pipe already means "wake up"
    (void)w;
  }
  void post(Ready r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      items.push_back(std::move(r));
    }
    wake();
  }
  void drain() {
    uint8_t buf[256];
    while (read(rd.get(), buf, sizeof(buf)) > 0) {
    }
  }
};

// The in-process view of the served data: plain MemStore calls, no sockets.
class TcpStoreServer::LocalHandle : public Store {
 public:
  explicit LocalHandle(std::shared_ptr<TcpStoreServer> s) : s_(std::move(s)) {}
  ~LocalHandle() override { s_->releaseLocal(); }
  ncclResult_t set(const std::string& key, std::vector<uint8_t> value) override {
    return s_->data_->set(key, std::move(value));
  }
  ncclResult_t get(const std::vector<std::string>& keys, std::vector<std::vector<uint8_t>>* values,
                   const WaitBound& bound) override {
    return s_->data_->get(keys, values, bound);
  }
  ncclResult_t add(const std::string& key, int64_t delta, int64_t* result) override {
    return s_->data_->add(key, delta, result);
  }
  ncclResult_t erasePrefix(const std::string& prefix) override { return s_->data_->erasePrefix(prefix); }

 private:
  std::shared_ptr<TcpStoreServer> s_;
};

// ---- Lifecycle --------------------------------------------------------------------

TcpStoreServer::TcpStoreServer(const wire::Secret& secret, const Options& opts)
    : secret_(secret), opts_(opts), pid_(getpid()), mailbox_(std::make_shared<Mailbox>()) {}

ncclResult_t TcpStoreServer::start(const SockAddr& addr, const wire::Secret& secret, const Options& opts,
                                   std::shared_ptr<TcpStoreServer>* out) {
  std::shared_ptr<TcpStoreServer> s(new TcpStoreServer(secret, opts));
  CHORUS_CHECK(listenSocket(addr, &s->listenFd_, &s->addr_));
  CHORUS_CHECK(s->mailbox_->init());
  s->data_ = std::make_shared<MemStore>("store served in this process at " + s->addr_.str());
  try {
    // The thread owns a reference: the server lives as long as it serves, and
    // the last owner (often this thread, on its way out) frees it. Detached,
    // so a server that stops by itself leaves nothing behind to join.
    std::thread([s] {
      pthread_setname_np(pthread_self(), "chorus-store");
      // An exception is logged; the clients then see the server go away.
      guardedRun("bootstrap store server thread", [&] { s->run(); });
    }).detach();
  } catch (const std::exception& e) {
    return fail(ncclSystemError, "bootstrap: cannot start the store server thread: %s", e.what());
  }
  CHORUS_INFO(kLogInit | kLogBootstrap, "bootstrap: store server listening on %s", s->addr_.str().c_str());
  *out = std::move(s);
  return ncclSuccess;
}

void TcpStoreServer::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->stop = true;
  }
  mailbox_->wake();
}

std::shared_ptr<Store> TcpStoreServer::attachLocal() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return nullptr;
  ++localClients_;
  hadClients_ = true;
  return std::make_shared<LocalHandle>(shared_from_this());
}

void TcpStoreServer::releaseLocal() {
  if (getpid() != pid_) return;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = --localClients_ == 0;
  }
  mailbox_->wake();  // let the thread decide whether that was the last client
  if (last) lingerForRemoteClients();
}

// See the header: keeps this process (and so the server) around while remote
// ranks may still need an answer. The checks read the mailbox before busy_:
// the thread sets busy_ before it takes replies out of the mailbox and clears
// it only once they are written, so a reply is always visible in one of them.
void TcpStoreServer::lingerForRemoteClients() {
  const auto start = Clock::now();
  const auto cap = start + std::chrono::milliseconds(opts_.lingerMaxMs);
  const auto idle = std::chrono::milliseconds(opts_.lingerIdleMs);
  int remaining = 0;
  while (true) {
    bool mailboxEmpty = false;
    {
      std::lock_guard<std::mutex> lock(mailbox_->mu);
      mailboxEmpty = mailbox_->items.empty();
    }
    auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      remaining = tcpClients_;
      if (tcpClients_ == 0 || finished()) return;
      if (mailboxEmpty && !busy_ && now - lastRemoteFrame_ >= idle) break;
    }
    if (now >= cap) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHORUS_INFO(kLogBootstrap, "bootstrap: store server at %s keeps serving %d remote client(s) after its last local "
              "user left (waited %lld ms)", addr_.str().c_str(), remaining,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()));
}

void TcpStoreServer::noteRemoteActivity() {
  std::lock_guard<std::mutex> lock(mu_);
  lastRemoteFrame_ = Clock::now();
}

int TcpStoreServer::tcpClients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tcpClients_;
}

bool TcpStoreServer::shouldExit() {
  bool unsent = false;
  for (const auto& [id, c] : conns_) unsent = unsent || (c->authed && c->outOff < c->out.size());
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = unsent;
  if (!hadClients_ || localClients_ != 0 || tcpClients_ != 0) return false;
  closing_ = true;
  return true;
}

// ---- The serving loop ----------------------------------------------------------------

int TcpStoreServer::pollTimeoutMs(Clock::time_point now) const {
  // Wake at least once a second; sooner when a hello or a half frame is due.
  auto next = now + std::chrono::seconds(1);
  if (acceptPausedUntil_ > now) next = std::min(next, acceptPausedUntil_);
  auto stall = std::chrono::milliseconds(opts_.stallMs);
  for (const auto& [id, c] : conns_) {
    if (!c->authed) next = std::min(next, c->opened + stall);
    if (!c->in.empty()) next = std::min(next, c->lastRecv + stall);
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
  return ms < 1 ? 1 : static_cast<int>(ms);
}

void TcpStoreServer::run() {
  std::vector<pollfd> pfds;
  std::vector<uint64_t> ids;
  while (true) {
    pfds.clear();
    ids.clear();
    pfds.push_back(pollfd{mailbox_->rd.get(), POLLIN, 0});
    // poll() skips negative descriptors: that is how accepting pauses.
    bool accepting = Clock::now() >= acceptPausedUntil_;
    pfds.push_back(pollfd{accepting ? listenFd_.get() : -1, POLLIN, 0});
    for (const auto& [id, c] : conns_) {
      short ev = POLLIN;
      if (c->outOff < c->out.size()) ev |= POLLOUT;
      pfds.push_back(pollfd{c->fd.get(), ev, 0});
      ids.push_back(id);
    }
    int n = poll(pfds.data(), pfds.size(), pollTimeoutMs(Clock::now()));
    if (n < 0 && errno != EINTR) {
      CHORUS_WARN(kLogBootstrap, "bootstrap: store server at %s: poll failed: %s", addr_.str().c_str(), strerror(errno));
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = true;  // cleared by shouldExit() once this round's replies are written
    }
    if (pfds[0].revents != 0) mailbox_->drain();
    {
      std::lock_guard<std::mutex> lock(mailbox_->mu);
      if (mailbox_->stop) break;
    }
    deliverReady();
    if (pfds[1].revents != 0) acceptAll();
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = conns_.find(ids[i]);
      if (it == conns_.end()) continue;
      short re = pfds[i + 2].revents;
      if ((re & (POLLIN | POLLHUP | POLLERR)) != 0) readFrom(*it->second);
      if (!it->second->dead && (re & POLLOUT) != 0) flush(*it->second);
    }
    checkStalls(Clock::now());
    reapDead();
    if (shouldExit()) break;
  }
  for (auto& [id, c] : conns_) c->dead = true;
  reapDead();
  listenFd_.reset();
  CHORUS_INFO(kLogBootstrap, "bootstrap: store server at %s stopped after %llu requests", addr_.str().c_str(),
              static_cast<unsigned long long>(served_.load()));
  finished_.store(true, std::memory_order_release);
}

void TcpStoreServer::acceptAll() {
  while (true) {
    SockAddr peer;
    peer.len = sizeof(peer.storage);
    int fd = accept4(listenFd_.get(), peer.sa(), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors or similar: the pending connection stays queued and
      // would wake poll() at once, so stop listening for a moment instead of spinning.
      CHORUS_WARN(kLogBootstrap, "bootstrap: store server at %s: accept failed: %s; pausing new connections for 1 s",
                  addr_.str().c_str(), strerror(errno));
      acceptPausedUntil_ = Clock::now() + std::chrono::seconds(1);
      return;
    }
    auto c = std::make_unique<Conn>();
    c->id = nextConn_++;
    c->fd = ForkClosedFd(fd);
    c->peer = peer.str();
    c->opened = c->lastRecv = Clock::now();
    setStreamOptions(fd);
    CHORUS_TRACE(kLogBootstrap, "bootstrap: store server at %s: connection from %s", addr_.str().c_str(),
                 c->peer.c_str());
    conns_.emplace(c->id, std::move(c));
  }
}

void TcpStoreServer::readFrom(Conn& c) {
  uint8_t buf[65536];
  size_t budget = 4u << 20;  // bounded per wakeup so one client cannot starve others
  bool eof = false;
  while (budget > 0) {
    ssize_t r = recv(c.fd.get(), buf, sizeof(buf), 0);
    if (r > 0) {
      c.in.insert(c.in.end(), buf, buf + r);
      c.lastRecv = Clock::now();
      budget -= std::min(budget, static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;
    break;
  }
  if (c.authed && !c.in.empty()) noteRemoteActivity();
  parseFrames(c);
  if (!eof || c.dead) return;
  if (!c.authed) {
    refuse(c, "closed before completing the hello");
    return;
  }
  if (!c.in.empty())
    CHORUS_WARN(kLogBootstrap, "bootstrap: rank %d (%s) disconnected in the middle of a frame", c.rank, c.peer.c_str());
  CHORUS_TRACE(kLogBootstrap, "bootstrap: rank %d (%s) disconnected", c.rank, c.peer.c_str());
  c.dead = true;
}

void TcpStoreServer::parseFrames(Conn& c) {
  size_t off = 0;
  while (!c.dead && c.in.size() - off >= wire::kHeaderBytes) {
    uint32_t len = wire::readLength(c.in.data() + off);
    uint32_t cap = c.authed ? opts_.maxFrameBytes : wire::kMaxHelloBytes;
    if (len > cap) return refuse(c, "frame of %u bytes exceeds the %u-byte limit", len, cap);
    if (len < wire::kMinFrameBytes) return refuse(c, "frame of %u bytes is too short", len);
    if (c.in.size() - off - wire::kHeaderBytes < len) break;
    handleFrame(c, c.in.data() + off + wire::kHeaderBytes, len);
    off += wire::kHeaderBytes + len;
  }
  if (!c.dead) c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
}

void TcpStoreServer::handleFrame(Conn& c, const uint8_t* p, size_t n) {
  wire::Reader r(p, n);
  uint8_t op = 0;
  uint32_t req = 0;
  r.u8(&op);
  r.u32(&req);
  served_.fetch_add(1, std::memory_order_relaxed);
  if (!c.authed) return handleHello(c, op, req, r);
  std::string key;
  switch (static_cast<Op>(op)) {
    case Op::Set: {
      std::vector<uint8_t> value;
      if (!r.str(&key) || !r.bytes(&value) || !r.atEnd()) return refuse(c, "malformed set request");
      // Answered first: a set can wake a local rank that then lets its
      // process exit, and the answer must not be lost with it. Nothing can
      // observe the gap: this thread applies the set before its next frame.
      reply(c, wire::Writer(Op::Reply, req).u8(static_cast<uint8_t>(Status::Ok)).finish());
      data_->set(key, std::move(value));
      return;
    }
    case Op::Get:
      return handleGet(c, req, r);
    case Op::Add: {
      int64_t delta = 0, result = 0;
      if (!r.str(&key) || !r.i64(&delta) || !r.atEnd()) return refuse(c, "malformed add request");
      wire::Writer w(Op::Reply, req);
      if (data_->tryAdd(key, delta, &result))
        w.u8(static_cast<uint8_t>(Status::Ok)).i64(result);
      else
        w.u8(static_cast<uint8_t>(Status::Error)).str("add on key '" + key + "', which holds a value that is not a counter");
      return reply(c, w.finish());
    }
    case Op::ErasePrefix:
      if (!r.str(&key) || !r.atEnd()) return refuse(c, "malformed erase request");
      data_->erasePrefix(key);
      return reply(c, wire::Writer(Op::Reply, req).u8(static_cast<uint8_t>(Status::Ok)).finish());
    case Op::Cancel:
      return handleCancel(c, r);
    default:
      return refuse(c, "unknown request type %u", op);
  }
}

void TcpStoreServer::handleHello(Conn& c, uint8_t op, uint32_t req, wire::Reader& r) {
  uint32_t magic = 0, rank = 0;
  uint16_t version = 0;
  wire::Secret secret{};
  if (static_cast<Op>(op) != Op::Hello || !r.u32(&magic) || magic != wire::kMagic)
    return refuse(c, "not a Chorus store client (no hello)");
  if (!r.u16(&version) || version != wire::kVersion)
    return refuse(c, "protocol version %u, this server speaks %u", version, wire::kVersion);
  if (!r.raw(secret.data(), secret.size()) || !r.u32(&rank) || !r.atEnd()) return refuse(c, "malformed hello");
  if (!wire::secretsEqual(secret, secret_)) return refuse(c, "wrong secret (a unique id from another job?)");
  c.authed = true;
  c.rank = static_cast<int>(rank);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++tcpClients_;
    hadClients_ = true;
  }
  CHORUS_TRACE(kLogBootstrap, "bootstrap: rank %d connected from %s", c.rank, c.peer.c_str());
  reply(c, wire::Writer(Op::Reply, req).u8(static_cast<uint8_t>(Status::Ok)).u32(wire::kMagic).u16(wire::kVersion).finish());
}

void TcpStoreServer::handleGet(Conn& c, uint32_t req, wire::Reader& r) {
  uint32_t n = 0;
  if (!r.u32(&n)) return refuse(c, "malformed get request");
  std::vector<std::string> keys;
  keys.reserve(std::min<uint32_t>(n, 4096));
  for (uint32_t i = 0; i < n; ++i) {
    std::string k;
    if (!r.str(&k)) return refuse(c, "malformed get request");
    keys.push_back(std::move(k));
  }
  if (!r.atEnd() || c.watches.count(req) != 0) return refuse(c, "malformed get request");
  MemStore::Values now;
  std::shared_ptr<Mailbox> box = mailbox_;
  uint64_t connId = c.id;
  uint64_t wid = data_->watch(keys, &now, [box, connId, req](MemStore::Values v) {
    box->post(Mailbox::Ready{connId, req, std::move(v)});
  });
  if (wid != 0) {
    c.watches.emplace(req, wid);
    return;
  }
  wire::Writer w(Op::Reply, req);
  w.u8(static_cast<uint8_t>(Status::Ok)).u32(static_cast<uint32_t>(now.size()));
  for (const auto& v : now) w.bytes(v);
  reply(c, w.finish());
}

void TcpStoreServer::handleCancel(Conn& c, wire::Reader& r) {
  uint32_t target = 0;
  if (!r.u32(&target) || !r.atEnd()) return refuse(c, "malformed cancel request");
  auto it = c.watches.find(target);
  if (it == c.watches.end()) return;  // already answered
  MemStore::Missing m;
  bool cancelled = data_->cancelWatch(it->second, &m);
  c.watches.erase(it);
  if (!cancelled) return;  // fired meanwhile: its values are in the mailbox
  reply(c, wire::Writer(Op::Reply, target)
               .u8(static_cast<uint8_t>(Status::Cancelled))
               .u32(static_cast<uint32_t>(m.count))
               .str(m.first)
               .finish());
}

void TcpStoreServer::deliverReady() {
  std::vector<Mailbox::Ready> items;
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    items.swap(mailbox_->items);
  }
  for (auto& it : items) {
    auto c = conns_.find(it.conn);
    if (c == conns_.end() || c->second->dead) continue;
    c->second->watches.erase(it.req);
    wire::Writer w(Op::Reply, it.req);
    w.u8(static_cast<uint8_t>(Status::Ok)).u32(static_cast<uint32_t>(it.values.size()));
    for (const auto& v : it.values) w.bytes(v);
    reply(*c->second, w.finish());
  }
}

void TcpStoreServer::reply(Conn& c, std::vector<uint8_t> frame) {
  if (c.outOff == c.out.size()) {
    c.out = std::move(frame);
    c.outOff = 0;
  } else {
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }
  flush(c);
}

void TcpStoreServer::flush(Conn& c) {
  while (c.outOff < c.out.size()) {
    ssize_t w = send(c.fd.get(), c.out.data() + c.outOff, c.out.size() - c.outOff, MSG_NOSIGNAL);
    if (w > 0) {
      c.outOff += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    CHORUS_TRACE(kLogBootstrap, "bootstrap: sending to %s failed: %s", c.peer.c_str(), strerror(errno));
    c.dead = true;
    return;
  }
  c.out.clear();
  c.outOff = 0;
}

void TcpStoreServer::refuse(Conn& c, const char* fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  CHORUS_WARN(kLogBootstrap, "bootstrap: refused connection from %s: %s", c.peer.c_str(), why);
  refused_.fetch_add(1, std::memory_order_relaxed);
  c.dead = true;
}

void TcpStoreServer::checkStalls(Clock::time_point now) {
  auto stall = std::chrono::milliseconds(opts_.stallMs);
  for (auto& [id, c] : conns_) {
    if (c->dead) continue;
    if (!c->authed && now - c->opened > stall)
      refuse(*c, "no valid hello within %lld ms", static_cast<long long>(opts_.stallMs));
    else if (!c->in.empty() && now - c->lastRecv > stall)
      refuse(*c, "stalled for over %lld ms in the middle of a frame (%zu bytes received)",
             static_cast<long long>(opts_.stallMs), c->in.size());
  }
}

void TcpStoreServer::reapDead() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    Conn& c = *it->second;
    if (!c.dead) {
      ++it;
      continue;
    }
    MemStore::Missing ignored;
    for (const auto& [req, wid] : c.watches) data_->cancelWatch(wid, &ignored);
    if (c.authed) {
      std::lock_guard<std::mutex> lock(mu_);
      --tcpClients_;
    }
    it = conns_.erase(it);
  }
}

}  // namespace chorus
