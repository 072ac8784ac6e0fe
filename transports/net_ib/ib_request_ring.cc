#include "transports/net_ib/ib_request_ring.h"

namespace chorus::ib {

int IbRequestRing::post(uint64_t* seq) {
  if (outstanding() >= capacity()) return -1;
  int index = static_cast<int>(next_ % entries_.size());
  Entry& e = entries_[static_cast<size_t>(index)];
  e = Entry{State::Posted, next_, 0};
  if (seq != nullptr) *seq = next_;
  ++next_;
  return index;
}

bool IbRequestRing::finish(int index, size_t bytes) {
  if (index < 0 || index >= capacity()) return false;
  Entry& e = entries_[static_cast<size_t>(index)];
  if (e.state != State::Posted) return false;
  e.state = State::Finished;
  e.bytes = bytes;
  return true;
}

bool IbRequestRing::tryReport(int index, size_t* bytes) {
  if (index < 0 || index >= capacity()) return false;
  Entry& target = entries_[static_cast<size_t>(index)];
  if (target.state != State::Finished) return false;
  for (uint64_t s = oldest_; s < target.seq; ++s) {
    State st = entries_[s % entries_.size()].state;
    if (st != State::Finished && st != State::Reported) return false;
  }
  target.state = State::Reported;
  if (bytes != nullptr) *bytes = target.bytes;
  reclaim();
  return true;
}

void IbRequestRing::reclaim() {
  while (oldest_ < next_ && entries_[oldest_ % entries_.size()].state == State::Reported) {
    entries_[oldest_ % entries_.size()].state = State::Free;
    ++oldest_;
  }
}

}  // namespace chorus::ib
