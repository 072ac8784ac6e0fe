#include "plan/setup_notes.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/log.h"
#include "kernels/common/step_rules.h"
#include "plan/blocked_calls.h"
#include "plan/plan.h"
#include "plan/setup_note_wire.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

const char* const kNoteTag = "opnote";
constexpr size_t kMaxWaitHops = 16;  // a wait chain stops growing here

using opnote::Hop;
using opnote::NoteKind;

bool pointToPoint(const OpPrint& p) { return isSendOrRecv(static_cast<CollType>(p.coll)); }

void post(ncclComm* comm, int peer, std::vector<uint8_t> note) {
  if (comm->bootstrap->send(peer, kNoteTag, std::move(note)) != ncclSuccess)
    CHORUS_INFO(kLogColl, "rank %d: could not send a setup note to rank %d", comm->id.rank, peer);
}
void post(const Plan& plan, int peer, std::vector<uint8_t> note) { post(plan.comm, peer, std::move(note)); }

void sendVerdictFrom(ncclComm* comm, const OpMismatchRecord& r) {
  const std::vector<uint8_t> note = opnote::encodeVerdictNote(comm->id.rank, r);
  for (int peer = 0; peer < comm->id.nranks; ++peer)
    if (peer != comm->id.rank) post(comm, peer, note);
}

// The first task of `mine` that a task of rank `peer`'s call disagrees with.
bool disagreement(int self, const std::vector<CallTask>& mine, int peer, const std::vector<CallTask>& theirs,
                  OpMismatchRecord* r) {
  for (const CallTask& t : theirs)
    for (const CallTask& m : mine) {
      if (!notesDisagree(m.print, m.peer, self, t.print, t.peer, peer)) continue;
      *r = OpMismatchRecord{m.print, t.print, self, peer};
      return true;
    }
  return false;
}

// The first task of `tasks` of type `coll` with peer `peer`, or nullptr.
const CallTask* findP2p(const std::vector<CallTask>& tasks, CollType coll, int peer) {
  for (const CallTask& t : tasks)
    if (static_cast<CollType>(t.print.coll) == coll && t.peer == peer) return &t;
  return nullptr;
}

// Crossed sends: this rank sends to the peer and does not receive from it,
// while the peer (which waits on this rank in setup) sends to this rank a
// message this rank has not numbered a receive for, and does not receive
// from it. Neither call can finish before the other: a deadlock, reported
// like a mismatch. Sound in GPU mode too: both wait in setup, before their
// calls can be enqueued.
bool crossedSends(const Plan& plan, const std::vector<CallTask>& mine, int peer, const std::vector<CallTask>& theirs,
                  OpMismatchRecord* r) {
  const int self = plan.comm->id.rank;
  const CallTask* out = findP2p(mine, CollType::Send, peer);
  const CallTask* in = findP2p(theirs, CollType::Send, self);
  if (out == nullptr || in == nullptr || findP2p(mine, CollType::Recv, peer) != nullptr ||
      findP2p(theirs, CollType::Recv, self) != nullptr || in->print.seq <= plan.comm->opCounters.received(peer))
    return false;
  *r = OpMismatchRecord{out->print, in->print, self, peer};
  return true;
}

PeerCounts countsTowards(const OpCounters& c, int peer) { return {c.collectives(), c.sent(peer), c.received(peer)}; }

// Calls blocked on each other (plan/blocked_calls.h): the peer's call, the
// one its note describes, needs an operation this rank has not numbered,
// and this rank's call one the peer had not numbered when it sent the note.
// Neither call can return: a deadlock, reported like a mismatch. Host mode
// only: a GPU-mode call returns once enqueued, so its rank may have
// numbered more since.
bool blockedOnEachOther(const Plan& plan, const std::vector<CallTask>& mine, int peer,
                        const std::vector<CallTask>& theirs, const PeerCounts& theirCounts, OpMismatchRecord* r) {
  const ncclComm* comm = plan.comm;
  const int self = comm->id.rank;
  if (!comm->id.hostMode || !comm->conns || !comm->conns->peer(peer).hostMode) return false;
  const int in = firstUnmetNeed(theirs, peer, self, countsTowards(comm->opCounters, peer));
  const int out = in < 0 ? -1 : firstUnmetNeed(mine, self, peer, theirCounts);
  if (out < 0) return false;
  *r = OpMismatchRecord{mine[out].print, theirs[in].print, self, peer};
  return true;
}

bool onlySends(const std::vector<CallTask>& tasks) {
  for (const CallTask& t : tasks)
    if (static_cast<CollType>(t.print.coll) != CollType::Send) return false;
  return !tasks.empty();
}

// Longer cycles of sends. An edge a -> b: rank a waits in connection setup
// for rank b's receiver, in a call of sends only, and b has never numbered a
// receive from a (its first one makes that receiver). A rank b that learns
// of such an edge while it waits in setup itself, in a call of sends only,
// passes the chain of edges on to the ranks it waits for. b's call has no
// receive, so it cannot make the receiver a waits for before that call
// returns, which needs its own receivers: each edge of a chain stands as
// long as its last one does, which its target checks. A rank that waits for
// a rank already in the chain closes a cycle: none of these calls can
// return, a deadlock reported like a mismatch, naming this rank's send and
// the send of the rank it waits for (whose target goes in `root`, which a
// send's fingerprint does not use).
// Extends `chain` (whose last edge ends at this rank) by this rank's own
// edges: a cycle gives true with *r, else the longer chains go on.
bool extendChain(const Plan& plan, const std::vector<Hop>& chain, OpMismatchRecord* r) {
  const int self = plan.comm->id.rank;
  const std::vector<CallTask> mine = planTasks(plan);
  const Hop& in = chain.back();
  if (!onlySends(mine) || in.to != self || static_cast<CollType>(in.send.coll) != CollType::Send ||
      plan.comm->opCounters.received(in.from) != 0 || chain.size() >= opnote::kMaxEntries)
    return false;
  const std::vector<int> waitsFor = plan.comm->conns->pendingPeers();
  for (int target : waitsFor)
    for (const Hop& h : chain) {
      const CallTask* out = findP2p(mine, CollType::Send, target);
      if (out == nullptr || h.from != target) continue;
      OpPrint theirs = h.send;
      theirs.root = h.to;
      *r = OpMismatchRecord{out->print, theirs, self, target};
      return true;
    }
  for (int target : waitsFor)
    if (const CallTask* out = findP2p(mine, CollType::Send, target)) {
      std::vector<Hop> longer = chain;
      longer.push_back({out->print, self, target});
      post(plan, target, opnote::encodeHopsNote(NoteKind::Chain, self, longer));
    }
  return false;
}

// Wait chains: cycles of waits through point-to-point calls, in host mode
// (a host-mode call returns only once its sends were taken and its receives
// arrived). A hop a -> b holds a task of rank a's current call, a Send or a
// Recv with peer b, that needs an operation b has not numbered (b's Recv or
// Send of that number, plan/blocked_calls.h); only b can tell, from its own
// counters, so a hop is checked where it ends. A rank that reads a peer's
// note (sent once the peer's call idled, or at setup) whose task needs such
// an operation of this rank starts a chain, and a rank that receives a chain
// whose last hop holds passes it on, with a hop for each point-to-point task
// of its own call, to that task's peer. Each hop stands as long as the next
// one does: b cannot number the operation before its own call returns, which
// needs the next rank's operation, and so on. A rank that checks the last hop
// and finds itself at the start of an earlier one, in the same call, closes
// a cycle in which no call can return: a deadlock, reported like a mismatch.
// It finds the ring of receives-before-sends (every rank receives from the
// previous one outside a group), which the checks between two ranks and the
// chains of sends above cannot. A late rank is never part of one: its
// counters include the call it is making.

// Whether this rank and `peer` both run their calls in host mode.
bool hostModePair(const Plan& plan, int peer) {
  const ncclComm* comm = plan.comm;
  return comm->id.hostMode && comm->conns && peer >= 0 && peer < comm->id.nranks && peer != comm->id.rank &&
         comm->conns->peer(peer).hostMode;
}

// Whether hop `h` (ending at this rank) holds now.
bool hopHolds(const Plan& plan, const Hop& h) {
  return pointToPoint(h.send) &&
         needsUnnumbered(CallTask{h.send, h.to}, h.from, h.to, countsTowards(plan.comm->opCounters, h.from));
}

// Passes `chain` (whose last hop ends at this rank and holds) on along each
// point-to-point task of this rank's call, within the call's note budget.
void passWaitsOn(const Plan& plan, const std::vector<Hop>& chain) {
  const int self = plan.comm->id.rank;
  if (chain.size() >= kMaxWaitHops) return;
  for (const CallTask& t : planTasks(plan)) {
    if (!pointToPoint(t.print) || !hostModePair(plan, t.peer) || plan.waitNotesLeft == 0) continue;
    --plan.waitNotesLeft;
    std::vector<Hop> longer = chain;
    longer.push_back({t.print, self, t.peer});
    post(plan, t.peer, opnote::encodeHopsNote(NoteKind::Waits, self, longer));
  }
}

// This rank's hop `h` of an earlier link of the chain, if it is still a task
// of the current call (seq numbers of one peer and direction never repeat).
bool stillMine(const Plan& plan, const Hop& h) {
  for (const CallTask& t : planTasks(plan))
    if (t.peer == h.to && t.print.coll == h.send.coll && t.print.seq == h.send.seq) return true;
  return false;
}

// The cycle from hop `first` to the end of `chain`, for the log.
std::string describeWaits(const std::vector<Hop>& chain, size_t first) {
  std::string text;
  for (size_t i = first; i < chain.size(); ++i) {
    const Hop& h = chain[i];
    char hop[96];
    snprintf(hop, sizeof(hop), "%srank %d waits for rank %d (%s #%u)", text.empty() ? "" : ", ", h.from, h.to,
             static_cast<CollType>(h.send.coll) == CollType::Send ? "Send" : "Recv", h.send.seq);
    text += hop;
  }
  return text;
}

// A chain of waits arrived: closes a cycle (true with *r) or goes on.
bool extendWaits(const Plan& plan, const std::vector<Hop>& chain, OpMismatchRecord* r) {
  const int self = plan.comm->id.rank;
  const Hop& in = chain.back();
  if (in.to != self || !hostModePair(plan, in.from) || !hopHolds(plan, in)) return false;
  for (size_t j = 0; j + 1 < chain.size(); ++j) {
    if (chain[j].from != self) continue;
    if (!stillMine(plan, chain[j])) return false;  // this rank's call moved on since
    OpPrint mine = chain[j].send, theirs = in.send;
    mine.root = chain[j].to;  // the peers of the two tasks (describeOpMismatch)
    theirs.root = self;
    mine.pad = kWaitCycleMark;
    *r = OpMismatchRecord{mine, theirs, self, in.from};
    CHORUS_WARN(kLogColl, "rank %d: deadlock in point-to-point calls: %s", self, describeWaits(chain, j).c_str());
    return true;
  }
  passWaitsOn(plan, chain);
  return false;
}

// A peer's note whose call needs an operation this rank has not numbered
// starts a chain of waits here.
void startWaits(const Plan& plan, int peer, const std::vector<CallTask>& theirs) {
  const int self = plan.comm->id.rank;
  if (!hostModePair(plan, peer)) return;
  for (const CallTask& t : theirs) {
    const Hop h{t.print, peer, self};
    if (t.peer != self || !hopHolds(plan, h)) continue;
    passWaitsOn(plan, {h});
    return;
  }
}

// The mismatch between the plan and one note of rank `peer`, if any.
bool judgeOps(const Plan& plan, int peer, const std::vector<CallTask>& theirs, const PeerCounts& theirCounts,
              OpMismatchRecord* r) {
  const int self = plan.comm->id.rank;
  const std::vector<CallTask> mine = planTasks(plan);
  if (disagreement(self, mine, peer, theirs, r)) return true;
  if (crossedSends(plan, mine, peer, theirs, r) || blockedOnEachOther(plan, mine, peer, theirs, theirCounts, r))
    return true;
  startWaits(plan, peer, theirs);
  const CallTask* in = findP2p(theirs, CollType::Send, self);
  return in != nullptr && onlySends(theirs) && extendChain(plan, {Hop{in->print, peer, self}}, r);
}

// Reads one note; true with *r on a mismatch or a verdict.
bool judge(const Plan& plan, int peer, const std::vector<uint8_t>& bytes, OpMismatchRecord* r, bool* selfFound) {
  opnote::SetupNote note;
  if (!opnote::decodeSetupNote(bytes, peer, &note)) return false;
  *selfFound = note.kind != NoteKind::Verdict;
  switch (note.kind) {
    case NoteKind::Ops:
      return judgeOps(plan, peer, note.tasks, note.counts, r);
    case NoteKind::Chain:
      return note.hops.back().from == peer && extendChain(plan, note.hops, r);
    case NoteKind::Waits:
      return note.hops.back().from == peer && extendWaits(plan, note.hops, r);
    case NoteKind::Verdict:
      *r = note.verdict;
      return true;
  }
  return false;
}

}  // namespace

bool notesDisagree(const OpPrint& mine, int minePeer, int self, const OpPrint& theirs, int theirPeer, int peer) {
  if (!mine.valid || !theirs.valid || mine.seq != theirs.seq) return false;
  if (pointToPoint(mine) != pointToPoint(theirs)) return false;
  if (!pointToPoint(mine)) return !step::printMatches(theirs, mine);
  // A Send #k to the peer is its Recv #k from this rank, and the other way round.
  if (minePeer != peer || theirPeer != self || mine.coll == theirs.coll) return false;
  return !step::printMatches(step::expectedFromPeer(theirs), step::expectedFromPeer(mine));
}

void sendSetupNotes(const Plan& plan, const std::vector<int>& peers) {
  std::vector<uint8_t> note = opnote::encodeOpsNote(plan.comm->id.rank, planTasks(plan));
  for (int peer : peers) {
    opnote::setNoteCounts(&note, countsTowards(plan.comm->opCounters, peer));
    post(plan, peer, note);
  }
}

std::vector<CallTask> planTasks(const Plan& plan) {
  std::vector<CallTask> mine;
  for (size_t k = 0; k < plan.tasks.size() && k < plan.stamps.size(); ++k)
    mine.push_back({plan.stamps[k].mine, plan.tasks[k].root});
  return mine;
}

void sendVerdictNotes(const Plan& plan, const OpMismatchRecord& r) { sendVerdictFrom(plan.comm, r); }

bool readNotesAgainstLaunched(ncclComm* comm, const std::vector<CallTask>& launched, OpMismatchRecord* r,
                              bool* selfFound) {
  if (comm->bootstrap == nullptr || launched.empty()) return false;
  return comm->bootstrap->drainArrived(kNoteTag, [&](int peer, const std::vector<uint8_t>& bytes) {
    opnote::SetupNote note;
    if (!opnote::decodeSetupNote(bytes, peer, &note)) return false;
    *selfFound = note.kind != NoteKind::Verdict;
    if (note.kind == NoteKind::Verdict) {
      *r = note.verdict;
      return true;
    }
    if (note.kind != NoteKind::Ops || !disagreement(comm->id.rank, launched, peer, note.tasks, r)) return false;
    sendVerdictFrom(comm, *r);
    return true;
  });
}

bool readSetupNotes(const Plan& plan, OpMismatchRecord* r, bool* selfFound) {
  ncclComm* comm = plan.comm;
  if (comm->bootstrap == nullptr || plan.stamps.empty()) return false;
  return comm->bootstrap->drainArrived(kNoteTag, [&](int peer, const std::vector<uint8_t>& bytes) {
    if (!judge(plan, peer, bytes, r, selfFound)) return false;
    if (*selfFound) sendVerdictNotes(plan, *r);
    return true;
  });
}

}  // namespace chorus
