// Verdicts on connectors: how every rank of a mismatched operation learns of
// it (docs/reliability.md, "Operation fingerprints"). A verdict goes on every
// connector of the communicator, so it reaches every neighbour, whether or
// not the current plan uses the connector between them.
#include "core/comm.h"
#include "kernels/common/step_rules.h"
#include "plan/plan.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

template <class Fn>
void forEachEnd(const Plan& plan, Fn&& fn) {
  for (const ConnRef& c : plan.conns) fn(c.end());
  if (plan.comm != nullptr && plan.comm->conns) plan.comm->conns->forEachEnd(fn);
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

// A plan of one collective that also receives from a peer has that peer's
// fingerprint checked by its own receives: the peer made the same call, so
// it takes what this rank sends without waiting for it. Every other send
// connector (point-to-point, groups, a broadcast root) must be drained.
void classifySends(Plan& plan) {
  plan.unprovenSends.clear();
  const bool oneCollective =
      plan.tasks.size() == 1 && plan.tasks[0].type != CollType::Send && plan.tasks[0].type != CollType::Recv;
  for (const ConnRef& c : plan.conns) {
    if (c.send == nullptr) continue;
    bool proven = false;
    for (const ConnRef& r : plan.conns) proven = proven || (oneCollective && r.recv && r.end().peer == c.end().peer);
    if (!proven) plan.unprovenSends.push_back(c.send);
  }
  plan.sendsClassified = true;
}

bool sendsTaken(const Plan& plan) {
  if (plan.sendsClassified) {
    for (SendConnector* s : plan.unprovenSends)
      if (!s->drained()) return false;
    return true;
  }
  for (const ConnRef& c : plan.conns)
    if (c.send != nullptr && !c.send->drained()) return false;
  return true;
}

}  // namespace chorus
