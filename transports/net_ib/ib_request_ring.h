// Request bookkeeping of one verbs connection: a fixed ring of kIbSlots
// requests, taken in posting order. The ring index of a request is also its
// FIFO slot (sequence number modulo kIbSlots), and work-request ids carry it.
// A request is reported done only once it and every older request finished
// (in-order completion), and its entry is reused once every older entry was
// reported too. Pure bookkeeping, no verbs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::ib {

constexpr int kIbSlots = 32;

class IbRequestRing {
 public:
  enum class State : uint8_t { Free, Posted, Finished, Reported };

  explicit IbRequestRing(int capacity = kIbSlots) : entries_(static_cast<size_t>(capacity)) {}

  int capacity() const { return static_cast<int>(entries_.size()); }
  int outstanding() const { return static_cast<int>(next_ - oldest_); }
  // Sequence number the next post will get.
  uint64_t nextSeq() const { return next_; }

  // Takes the next entry; -1 when all are in use. *seq gets its sequence number.
  int post(uint64_t* seq = nullptr);
  // The hardware (or peer) finished entry `index` with `bytes` transferred.
  // False when the entry is not posted (a stray completion).
  bool finish(int index, size_t bytes);
  // In-order completion: true (and *bytes) once `index` and every older entry
  // finished; the entry is then released.
  bool tryReport(int index, size_t* bytes);
  State state(int index) const { return entries_[static_cast<size_t>(index)].state; }
  uint64_t seqOf(int index) const { return entries_[static_cast<size_t>(index)].seq; }

 private:
  struct Entry {
    State state = State::Free;
    uint64_t seq = 0;
    size_t bytes = 0;
  };
  void reclaim();

  std::vector<Entry> entries_;
  uint64_t next_ = 0;    // sequence number of the next post
  uint64_t oldest_ = 0;  // oldest sequence number not yet reclaimed
};

}  // namespace chorus::ib
