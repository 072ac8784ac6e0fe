// Fingerprints of a plan's tasks for one launch (src/core/op_fingerprint.h).
#include "core/comm.h"
#include "kernels/common/step_rules.h"
#include "plan/plan.h"
#include "transport/connection_table.h"

namespace chorus {

void stampPlan(Plan& plan) {
  // Classified once its connectors are connected (a placeholder sender does
  // not know its peer yet); else connectPlan does it after connecting.
  if (!plan.sendsClassified && !plan.comm->conns->hasPending())
    classifySends(plan);
  else
    flagAwaitedSends(plan);
  plan.stamps.resize(plan.tasks.size());
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const Task& t = plan.tasks[i];
    const uint32_t seq = plan.comm->opCounters.next(t.type, t.root);
    OpStamp& s = plan.stamps[i];
    s.mine = makeOpPrint(t.type, t.count, t.dtype, t.spec.kind, t.root, seq, t.wire.format, t.wire.deterministic);
    s.expect = step::expectedFromPeer(s.mine);
  }
  markPlanStarted(plan);
}

}  // namespace chorus
