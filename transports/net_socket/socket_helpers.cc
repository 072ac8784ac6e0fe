// Helper threads of a socket connection. Each thread owns a fixed set of data
// streams; parts are queued per stream in message order, which is the order
// the peer's helper for the same stream index reads them, so a stream needs
// no framing of its own. A helper sleeps on its condition variable while
// nothing is queued and in poll() while its sockets are not ready, so an idle
// connection costs no CPU.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/exception_guard.h"
#include "core/result.h"
#include "transports/net/net_wake.h"
#include "transports/net_socket/socket_comm.h"

namespace chorus::sock {

StreamHelpers::StreamHelpers(SocketComm* comm, bool send, uint32_t nthreads, uint32_t nsocks)
    : comm_(comm), send_(send), nsocks_(nsocks) {
  for (uint32_t t = 0; t < nthreads; ++t) {
    auto w = std::make_unique<Worker>();
    w->queues.resize(nsocks);
    w->firstStream = t * nsocks;
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    Worker* raw = w.get();
    raw->thread = std::thread([this, raw] {
      if (guardedRun("socket helper thread", [&] { run(*raw); }) != ncclSuccess)
        comm_->setError(lastErrorMessage(), false);
    });
  }
}

StreamHelpers::~StreamHelpers() { stop(); }

void StreamHelpers::stop() {
  stop_.store(true, std::memory_order_release);
  for (auto& w : workers_) {
    { std::lock_guard<std::mutex> lock(w->mu); }
    w->cv.notify_all();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

void StreamHelpers::queue(uint32_t stream, const Part& part) {
  Worker& w = *workers_[stream / nsocks_];
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.queues[stream % nsocks_].push_back(part);
  }
  w.cv.notify_one();
}

void StreamHelpers::finishPart(Worker& w, uint32_t local, bool ok) {
  Request* req = nullptr;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    req = w.queues[local].front().req;
    w.queues[local].pop_front();
  }
  if (!ok) req->partFailed.store(true, std::memory_order_relaxed);
  // After this the request may be freed by test(): touch it no more.
  req->partsLeft.fetch_sub(1, std::memory_order_acq_rel);
  netProxyKick();
}

bool StreamHelpers::moveOne(Worker& w, uint32_t local) {
  Part* part = nullptr;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.queues[local].empty()) return false;
    part = &w.queues[local].front();  // deque push_back keeps references valid
  }
  if (comm_->failed()) {
    finishPart(w, local, false);
    return true;
  }
  const int fd = comm_->dataFd(w.firstStream + local);
  char* p = part->data + part->done;
  const size_t left = part->bytes - part->done;
  ssize_t n = send_ ? ::send(fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, p, left, MSG_DONTWAIT);
  if (n > 0) {
    part->done += static_cast<size_t>(n);
    if (part->done == part->bytes) finishPart(w, local, true);
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  const int err = n < 0 ? errno : 0;
  std::string what = "data stream " + std::to_string(w.firstStream + local);
  comm_->setError("socket: connection " + std::string(send_ ? "to " : "from ") + comm_->remote() + " broken (" + what +
                      "): " + (err == 0 ? "closed by the peer mid-message (peer process died?)" : strerror(err)),
                  false);
  finishPart(w, local, false);
  return true;
}

// Sleeps until one of the worker's busy streams is ready (or 100 ms pass).
void StreamHelpers::waitReady(Worker& w) {
  pollfd fds[kMaxStreams];
  nfds_t n = 0;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    for (uint32_t s = 0; s < nsocks_; ++s)
      if (!w.queues[s].empty())
        fds[n++] = {comm_->dataFd(w.firstStream + s), static_cast<short>(send_ ? POLLOUT : POLLIN), 0};
  }
  if (n > 0) poll(fds, n, 100);
}

void StreamHelpers::run(Worker& w) {
  while (!stop_.load(std::memory_order_acquire)) {
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] {
        if (stop_.load(std::memory_order_acquire)) return true;
        for (const auto& q : w.queues)
          if (!q.empty()) return true;
        return false;
      });
    }
    if (stop_.load(std::memory_order_acquire)) return;
    bool moved = false;
    for (uint32_t s = 0; s < nsocks_; ++s) moved |= moveOne(w, s);
    if (!moved) waitReady(w);
  }
}

}  // namespace chorus::sock
