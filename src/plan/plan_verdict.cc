// Verdicts on connectors: how every rank of a mismatched operation learns of
// it (docs/reliability.md, "Operation fingerprints"). A verdict goes on every
// connector of the communicator, so it reaches every neighbour, whether or
// not the current plan uses the connector between them.
#include <algorithm>

#include "core/comm.h"
#include "kernels/common/step_rules.h"
#include "plan/plan.h"
#include "plan/setup_notes.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

// Skips senders still waiting in connection setup (no FIFO yet).
template <class Fn>
void forEachEnd(const Plan& plan, Fn&& fn) {
  auto connected = [&](const FifoEnd& e) {
    if (e.ctl != nullptr) fn(e);
  };
  for (const ConnRef& c : plan.conns) connected(c.end());
  if (plan.comm != nullptr && plan.comm->conns) plan.comm->conns->forEachEnd(connected);
}

// Whether `p`, stamped by `peer`, names an operation this rank has already
// numbered (running now or finished): one whose slots should have been taken.
bool due(const OpPrint& p, const OpCounters& counters, int peer) {
  const auto coll = static_cast<CollType>(p.coll);
  if (coll == CollType::Send) return p.seq <= counters.received(peer);
  return coll != CollType::Recv && p.seq <= counters.collectives();
}

// The stamp of the plan to name next to a stray slot of `p`: the task with
// the same number, else the first.
const OpPrint& counterpart(const Plan& plan, const OpPrint& p) {
  for (const OpStamp& s : plan.stamps)
    if (s.expect.seq == p.seq && s.expect.coll == p.coll) return s.mine;
  for (const OpStamp& s : plan.stamps)
    if (s.mine.seq == p.seq) return s.mine;
  return plan.stamps[0].mine;
}

}  // namespace

void spreadMismatch(const Plan& plan, const OpMismatchRecord& r) {
  forEachEnd(plan, [&](const FifoEnd& e) { fifoSetMismatch(e.ctl, r); });
}

bool findMismatch(const Plan& plan, OpMismatchRecord* r) {
  bool found = false;
  forEachEnd(plan, [&](const FifoEnd& e) { found = found || fifoMismatch(e.ctl, r); });
  return found;
}

bool findStraySlot(const Plan& plan, OpMismatchRecord* r) {
  if (plan.comm == nullptr || !plan.comm->conns || plan.stamps.empty()) return false;
  bool found = false;
  plan.comm->conns->forEachRecv([&](RecvConnector& in) {
    if (found || !in.ready()) return;
    const OpPrint& p = in.print();
    if (!p.valid || !due(p, plan.comm->opCounters, in.end().peer)) return;
    for (const OpStamp& s : plan.stamps)
      if (step::printMatches(p, s.expect)) return;
    r->mine = counterpart(plan, p);
    r->theirs = p;
    r->rank = plan.comm->id.rank;
    r->peer = in.end().peer;
    found = true;
  });
  return found;
}

bool findStrayWait(const Plan& plan, OpMismatchRecord* r) {
  if (plan.comm == nullptr || !plan.comm->conns || plan.stamps.empty()) return false;
  const int self = plan.comm->id.rank;
  bool found = false;
  plan.comm->conns->forEachSend([&](const SendConnector& out) {
    OpPrint theirs;
    const FifoEnd& e = out.end();
    if (found || e.ctl == nullptr || !carriesMarks(e) || !fifoIntent(e.ctl, &theirs)) return;
    for (size_t k = 0; k < plan.stamps.size() && k < plan.tasks.size() && !found; ++k) {
      if (!notesDisagree(plan.stamps[k].mine, plan.tasks[k].root, self, theirs, self, e.peer)) continue;
      *r = OpMismatchRecord{plan.stamps[k].mine, theirs, self, e.peer};
      found = true;
    }
  });
  return found;
}

// A plan of one collective that also receives from a peer has that peer's
// fingerprint checked by its own receives: the peer made the same call, so
// it takes what this rank sends without waiting for it. Every other send
// connector (point-to-point, groups, a broadcast root) must be drained.
// A broadcast or a reduce moves data along a tree or a chain, never in a
// cycle; in the other collectives every rank's result needs every rank's
// data, so a mismatch anywhere already stops everyone.
// Gather and scatter exchange only with their root, which waits for every
// rank; a scatter's receivers also wait for the root (awaitRootDone), since
// they send nothing it could refuse.
bool completesTogether(const Plan& plan) {
  constexpr auto bit = [](CollType t) { return 1u << static_cast<unsigned>(t); };
  constexpr unsigned kTogether =
      bit(CollType::Broadcast) | bit(CollType::Reduce) | bit(CollType::Gather) | bit(CollType::Scatter);
  return plan.tasks.size() == 1 && (kTogether & bit(plan.tasks[0].type)) != 0;
}

// A reduce's root sends only in deterministic mode's chain across hosts
// (plan_wire_chain_rs.cc): its value goes into the chain, whose end comes
// back to it, so its own receive proves the chain took it. Its sends are
// drained but not awaited: the chain's ranks await the root's completion
// mark, and the root awaiting theirs would wait in a cycle.
namespace {
bool rootOfReduce(const Plan& plan) {
  return completesTogether(plan) && plan.tasks[0].type == CollType::Reduce && plan.comm != nullptr &&
         plan.tasks[0].root == plan.comm->id.rank;
}
}  // namespace

void classifySends(Plan& plan) {
  plan.unprovenSends.clear();
  plan.awaitDone.clear();
  plan.awaitRootDone.clear();
  const bool oneCollective = plan.tasks.size() == 1 && !isSendOrRecv(plan.tasks[0].type);
  const bool awaits = completesTogether(plan) && !rootOfReduce(plan);
  for (const ConnRef& c : plan.conns) {
    if (c.send == nullptr) continue;
    bool proven = false;
    for (const ConnRef& r : plan.conns) proven = proven || (oneCollective && r.recv && r.end().peer == c.end().peer);
    if (proven) continue;
    plan.unprovenSends.push_back(c.send);
    if (awaits) plan.awaitDone.push_back(c.send);
  }
  if (completesTogether(plan) && plan.tasks[0].type == CollType::Scatter)
    for (const ConnRef& c : plan.conns)
      if (c.recv != nullptr) plan.awaitRootDone.push_back(c.recv);
  plan.flagsSends = false;
  for (const ConnRef& c : plan.conns)
    plan.flagsSends = plan.flagsSends || (c.send != nullptr && c.send->end().takenCounter);
  plan.sendsClassified = true;
  plan.finishesWithLanes =
      plan.unprovenSends.empty() && plan.awaitDone.empty() && plan.awaitRootDone.empty() && !completesTogether(plan);
  flagAwaitedSends(plan);
}

void flagAwaitedSends(const Plan& plan) {
  if (plan.sendsClassified && !plan.flagsSends) return;  // the common case: nothing to tell
  const auto& waited = plan.unprovenSends;
  for (const ConnRef& c : plan.conns)
    if (c.send != nullptr && c.send->end().takenCounter)  // only such ends pass the flag on (SendConnector::post)
      c.send->setAwaited(!plan.sendsClassified || std::find(waited.begin(), waited.end(), c.send) != waited.end());
}

namespace {

// Stores `seq` once (a waiting plan marks again on every pass); true when it changed.
bool mark(std::atomic<uint64_t>& at, uint64_t seq) {
  if (at.load(std::memory_order_relaxed) == seq) return false;
  at.store(seq, std::memory_order_release);
  return true;
}

// `finished`: a rooted plan that finished, whose peers wait for its marks:
// also the send connectors' mark, and a network link sends both marks at
// once (the receivers' in an ack, the senders' on its mark connection). A
// plan that marks when it starts lets the mark ride on the link's next ack
// (it acks the slots this plan takes): nobody waits on it alone, and an ack
// per call would be a second message per slot.
void markDone(const Plan& plan, bool finished) {
  const uint64_t seq = plan.collectiveSeq;
  if (seq == 0 || !plan.comm->id.hostMode) return;
  for (const ConnRef& c : plan.conns) {
    if (c.recv != nullptr) {
      if (carriesMarks(c.recv->end()) && mark(c.recv->end().ctl->doneSeq, seq) && finished) endMoved(c.recv->end());
    } else if (finished && carriesMarks(c.send->end()) && mark(c.send->end().ctl->sentDoneSeq, seq)) {
      endMoved(c.send->end());
    }
  }
}

void publishIntent(const Plan& plan) {
  if (!plan.comm->id.hostMode || plan.stamps.empty()) return;
  for (const ConnRef& c : plan.conns)
    if (c.recv != nullptr && carriesMarks(c.end())) fifoSetIntent(c.end().ctl, plan.stamps[0].mine);
}

// The peer of the first connector in `ends` whose `mark` is below `seq`, or
// -1; ends whose marks do not reach this side (`reaches` false) are skipped.
template <class Conn>
int firstUnmarked(const std::vector<Conn*>& ends, std::atomic<uint64_t> FifoControl::*mark, uint64_t seq,
                  bool (*reaches)(const FifoEnd&)) {
  for (Conn* c : ends)
    if (reaches(c->end()) && (c->end().ctl->*mark).load(std::memory_order_acquire) < seq) return c->end().peer;
  return -1;
}

}  // namespace

// A plan that does not wait for its own receivers marks its operation done
// at once: its senders then wait, as before, only for it to take their data
// (after their fingerprints matched). Marking only at its end could wait in
// a cycle (a group whose other task needs a rank that waits for this mark).
void markPlanStarted(const Plan& plan) {
  if (!completesTogether(plan)) {
    markDone(plan, false);
    return;
  }
  publishIntent(plan);
}

void markPlanDone(const Plan& plan) {
  if (completesTogether(plan)) markDone(plan, true);
}

int awaitedCompletion(const Plan& plan) {
  const uint64_t seq = plan.collectiveSeq;
  const int receiver = firstUnmarked(plan.awaitDone, &FifoControl::doneSeq, seq, carriesMarks);
  return receiver >= 0 ? receiver : firstUnmarked(plan.awaitRootDone, &FifoControl::sentDoneSeq, seq, carriesMarks);
}

bool rootsDone(const Plan& plan) {
  return plan.awaitRootDone.empty() ||
         firstUnmarked(plan.awaitRootDone, &FifoControl::sentDoneSeq, plan.collectiveSeq, carriesMarks) < 0;
}

namespace {

// sendsTaken for a plan with sends to wait for (kept out of its fast path).
[[gnu::noinline]] bool awaitedSendsTaken(const Plan& plan) {
  if (plan.sendsClassified) {
    for (SendConnector* s : plan.unprovenSends)
      if (!s->drained()) return false;
    return plan.awaitDone.empty() ||
           firstUnmarked(plan.awaitDone, &FifoControl::doneSeq, plan.collectiveSeq, carriesMarks) < 0;
  }
  for (const ConnRef& c : plan.conns)
    if (c.send != nullptr && !c.send->drained()) return false;
  return true;
}

}  // namespace

bool sendsTaken(const Plan& plan) {
  // The common case (one collective whose receives proved every send): nothing to wait for.
  if (plan.sendsClassified && plan.unprovenSends.empty() && plan.awaitDone.empty()) return true;
  return awaitedSendsTaken(plan);
}

}  // namespace chorus
