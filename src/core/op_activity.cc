#include "core/op_activity.h"

#include <time.h>

#include <algorithm>
#include <cstring>

namespace chorus {
namespace {

// CLOCK_MONOTONIC_COARSE: a few ns (no hardware counter read), ~4 ms resolution.
int64_t coarseNowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Adds `n` to a counter only the owning thread writes (op_activity.h): a
// relaxed load and store, no locked instruction on the call's path.
void bump(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

OpActivity::OpActivity() : lastEndMs_(coarseNowMs()) {}

int64_t OpActivity::msSinceLastCall() const { return coarseNowMs() - lastEndMs_.load(std::memory_order_relaxed); }

std::string describeCall(const OpPrint& call) {
  char text[160];
  describeOpPrint(call, text, sizeof(text));
  return text;
}

void OpActivity::begin(const OpPrint& first, int ntasks, int collectives) {
  constexpr auto r = std::memory_order_relaxed;
  uint64_t words[3];
  std::memcpy(words, &first, sizeof(words));
  for (int i = 0; i < 3; ++i) call_[i].store(words[i], r);
  ntasks_.store(ntasks, r);
  pendingColl_.store(collectives, r);
  bump(collStarted_, static_cast<uint64_t>(collectives));
  bump(p2pStarted_, static_cast<uint64_t>(ntasks - collectives));
  waitingSince_.store(0, r);
  inCall_.store(true, std::memory_order_release);
}

void OpActivity::end() {
  constexpr auto r = std::memory_order_relaxed;
  if (!inCall_.load(r)) return;
  const int coll = pendingColl_.load(r);
  bump(collDone_, static_cast<uint64_t>(coll));
  bump(p2pDone_, static_cast<uint64_t>(ntasks_.load(r) - coll));
  waitingSince_.store(0, r);
  lastEndMs_.store(coarseNowMs(), r);
  inCall_.store(false, std::memory_order_release);
}

void OpActivity::setWaiting(int64_t sinceUnixMs, int peer, bool receiving) {
  constexpr auto r = std::memory_order_relaxed;
  waitedPeer_.store(peer, r);
  waitedReceiving_.store(receiving, r);
  waitingSince_.store(sinceUnixMs, r);
}

void OpActivity::setDeviceWaiting(int64_t sinceUnixMs, int peer, bool receiving) {
  constexpr auto r = std::memory_order_relaxed;
  if (sinceUnixMs > 0) {
    waitedPeer_.store(peer, r);
    waitedReceiving_.store(receiving, r);
  }
  deviceWaitingSince_.store(sinceUnixMs, r);
}

OpActivity::Snapshot OpActivity::snapshot() const {
  constexpr auto r = std::memory_order_relaxed;
  Snapshot s;
  s.inCall = inCall_.load(std::memory_order_acquire);
  uint64_t words[3];
  for (int i = 0; i < 3; ++i) words[i] = call_[i].load(r);
  std::memcpy(&s.call, words, sizeof(words));
  s.ntasks = ntasks_.load(r);
  s.collStarted = collStarted_.load(r);
  s.collDone = collDone_.load(r);
  s.p2pStarted = p2pStarted_.load(r);
  s.p2pDone = p2pDone_.load(r);
  s.waitingSinceUnixMs = s.inCall ? waitingSince_.load(r) : 0;
  s.waitedPeer = waitedPeer_.load(r);
  s.waitedReceiving = waitedReceiving_.load(r);
  const int64_t onDevice = deviceWaitingSince_.load(r);
  if (!s.inCall && onDevice > 0) {
    // The latest call returned but its kernels have not finished.
    const auto coll = static_cast<uint64_t>(pendingColl_.load(r));
    const auto p2p = static_cast<uint64_t>(s.ntasks) - coll;
    s.inCall = true;
    s.collDone -= std::min(coll, s.collDone);
    s.p2pDone -= std::min(p2p, s.p2pDone);
    s.waitingSinceUnixMs = onDevice;
  }
  return s;
}

}  // namespace chorus
