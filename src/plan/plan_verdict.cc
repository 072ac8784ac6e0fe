// Verdicts on a plan's connectors: how every rank of a mismatched operation
// learns of it (docs/reliability.md, "Operation fingerprints").
#include "plan/plan.h"

namespace chorus {

void spreadMismatch(const Plan& plan, const OpMismatchRecord& r) {
  for (const ConnRef& c : plan.conns) fifoSetMismatch(c.end().ctl, r);
}

bool findMismatch(const Plan& plan, OpMismatchRecord* r) {
  for (const ConnRef& c : plan.conns)
    if (fifoMismatch(c.end().ctl, r)) return true;
  return false;
}

bool sendsTaken(const Plan& plan) {
  for (const ConnRef& c : plan.conns)
    if (c.send != nullptr && !c.send->drained()) return false;
  return true;
}

}  // namespace chorus
