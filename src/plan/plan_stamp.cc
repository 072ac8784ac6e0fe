// Fingerprints of a plan's tasks for one launch (src/core/op_fingerprint.h).
#include <algorithm>

#include "core/comm.h"
#include "kernels/common/step_rules.h"
#include "plan/plan.h"
#include "transport/connection_table.h"

namespace chorus {

namespace {

// Everything of the stamps that does not change from launch to launch.
void makeStamps(Plan& plan) {
  plan.stamps.resize(plan.tasks.size());
  plan.collectives = 0;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    OpStamp& s = plan.stamps[i];
    s.mine = makeOpPrint(t.type, t.count, t.dtype, t.spec.askedKind(), t.root, 0, t.wire.format, t.wire.deterministic);
    s.expect = step::expectedFromPeer(s.mine);
    plan.collectives += !isSendOrRecv(t.type) ? 1 : 0;
  }
  plan.stampsMade = true;
}

}  // namespace

void stampPlan(Plan& plan) {
  // Classified once its connectors are connected (a placeholder sender does
  // not know its peer yet); else connectPlan does it after connecting.
  if (!plan.sendsClassified && !plan.comm->conns->hasPending())
    classifySends(plan);
  else
    flagAwaitedSends(plan);
  if (!plan.stampsMade) makeStamps(plan);
  uint64_t collectiveSeq = 0;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    const uint32_t seq = plan.comm->opCounters.next(t.type, t.root);
    OpStamp& s = plan.stamps[i];
    s.mine.seq = seq;
    s.expect.seq = seq;  // expectedFromPeer keeps the number
    if (!isSendOrRecv(t.type)) collectiveSeq = std::max<uint64_t>(collectiveSeq, seq);
  }
  plan.collectiveSeq = collectiveSeq;
  plan.waitNotesLeft = Plan::kWaitNotesPerLaunch;
  markPlanStarted(plan);
}

}  // namespace chorus
