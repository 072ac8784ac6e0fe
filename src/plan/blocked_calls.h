// Calls blocked on each other (docs/reliability.md, "Operation fingerprints",
// "Calls with different operation numbers"). A rank's operations are
// numbered per communicator (collectives) and per peer and direction
// (sends, receives), and a host-mode call returns only once what it needs
// from its peers arrived or was taken. So a task that needs an operation of
// peer rank `other` numbered above `other`'s counter cannot complete before
// `other` makes a later call. Two host-mode ranks whose current calls each
// hold such a task for the other wait for each other forever, whatever
// their operation numbers: a deadlock, reported like a mismatch. A late
// rank never qualifies: its counters say what it has numbered, and its
// current call is the one its setup note describes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/op_fingerprint.h"

namespace chorus {

// One task of a call: its fingerprint and, for a Send or a Recv, its peer.
struct CallTask {
  OpPrint print;
  int peer = -1;
};

// What one rank has numbered so far, as far as one peer is concerned:
// collectives, sends to that peer and receives from it.
struct PeerCounts {
  uint32_t collectives = 0, sends = 0, receives = 0;
};

// Whether task `t` of rank `self` cannot complete before rank `other`
// numbers an operation beyond `otherCounts` (other's counts towards self):
// a Send needs the peer's Recv of its number, a Recv its Send, and a
// collective the same collective of every rank its data comes from or goes
// to directly. Empty tasks need nothing.
bool needsUnnumbered(const CallTask& t, int self, int other, const PeerCounts& otherCounts);

// The index of the first task in `tasks` (a call of rank `self`) for which
// needsUnnumbered holds, or -1.
int firstUnmetNeed(const std::vector<CallTask>& tasks, int self, int other, const PeerCounts& otherCounts);

}  // namespace chorus
