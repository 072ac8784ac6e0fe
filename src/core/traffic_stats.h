// A communicator's traffic counters (chorusCommGetStats, docs/api.md
// "Traffic counters"): the bytes this rank's connectors moved, by the kind of
// link each runs over, and the calls it completed.
//
// A connector end holds a pointer to one StatCounter of its communicator
// (FifoEnd::traffic, set by the connection table from the transport that made
// it) and adds each slot's bytes when it posts (sender) or frees (receiver)
// the slot. Every counter has one writer at a time: the thread running the
// communicator's operation, under its opMutex (which orders one call's
// writes before the next's), so add() is a relaxed load and store rather
// than a locked read-modify-write: the fast path pays no atomic instruction
// (a locked add per slot would also wait for the slot's stores to leave the
// store buffer). Readers (chorusCommGetStats, from any thread) see each
// counter's latest value; a reader racing with a running call may see one
// counter ahead of another.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace chorus {

// The same numbering as chorusLink_t (include/chorus/chorus.h).
enum class LinkKind : uint8_t { Inproc = 0, Shm = 1, P2p = 2, Net = 3 };
inline constexpr int kLinkKinds = 4;

// The link a transport's connectors run over, by the transport's name
// (transport/transport.h's Transport::name()); a transport not named here
// (a test's) counts as network.
inline LinkKind linkKindOf(const char* transportName) {
  if (std::strcmp(transportName, "inproc") == 0) return LinkKind::Inproc;
  if (std::strcmp(transportName, "shm") == 0) return LinkKind::Shm;
  if (std::strcmp(transportName, "p2p") == 0) return LinkKind::P2p;
  return LinkKind::Net;
}

class StatCounter {
 public:
  // Only the one writer (see above) may call this.
  void add(uint64_t n) { value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t read() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

struct TrafficStats {
  StatCounter sent[kLinkKinds];
  StatCounter recv[kLinkKinds];
  StatCounter ops;  // completed collective and point-to-point calls

  StatCounter* sentOver(LinkKind k) { return &sent[static_cast<int>(k)]; }
  StatCounter* recvOver(LinkKind k) { return &recv[static_cast<int>(k)]; }
};

}  // namespace chorus
