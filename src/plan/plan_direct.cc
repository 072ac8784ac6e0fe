// Direct all-reduce between two ranks: each rank sends its (pre-multiplied)
// input to the other and reduces the peer's data with its own. One hop
// instead of the ring's two, so small messages finish in about half the
// time; both ranks compute op(peer, own), which is bit-identical on both
// sides because every reduction operator is commutative elementwise.
// Each chunk is sent before it is reduced, so in-place calls never overwrite
// input that has not been sent yet, and a chunk never exceeds half a FIFO, so
// both ranks can always post their send before waiting.
#include <algorithm>

#include "core/result.h"
#include "plan/plan_builder.h"

namespace chorus {

ncclResult_t expandDirect(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  if (t.type != CollType::AllReduce || b.nranks() != 2)
    return fail(ncclInternalError, "direct schedule requested for %s on %d ranks", collName(t.type), b.nranks());
  const int peer = 1 - b.rank();
  const size_t esz = typeSize(t.dtype);
  sched::Segment s = b.segment(t, sched::SegmentKind::DirectPair);
  s.count = t.count;
  s.roundElems = std::max<size_t>(1, b.slotBytes(d.proto) / esz) * std::max<uint32_t>(1, b.nslots() / 2);
  CHORUS_CHECK(b.recvFrom(ConnClass::Direct, d.proto, 0, peer, &s.conn[0]));
  CHORUS_CHECK(b.sendTo(ConnClass::Direct, d.proto, 0, peer, &s.conn[1]));
  if (s.count > 0) b.lane(ConnClass::Direct, d.proto, 0, peer).segments.push_back(s);
  return ncclSuccess;
}

}  // namespace chorus
