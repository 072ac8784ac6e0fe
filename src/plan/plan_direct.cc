// Direct all-reduce: pairwise exchanges. Two ranks: each sends its
// (pre-multiplied) input to the other and reduces the peer's data with its
// own, one hop instead of the ring's two. A power-of-two rank count n > 2
// (host mode, sched::directAllReduceRanks): recursive doubling, log2(n)
// such exchanges in one lane, with the peers rank ^ 1, rank ^ 2, ...; each
// exchange after the first sends and combines the previous one's result in
// dst, and only the last applies SumPostDiv. Both ranks of an exchange
// compute op(peer, own) of the same two operands, which is bit-identical on
// both sides because every reduction operator is commutative elementwise,
// so every rank ends with the same bits.
// Each chunk is sent before it is reduced, so in-place calls never overwrite
// input that has not been sent yet, and a chunk never exceeds half a FIFO, so
// both ranks can always post their send before waiting.
#include <algorithm>

#include "core/result.h"
#include "plan/plan_builder.h"
#include "sched/segment.h"

namespace chorus {

ncclResult_t expandDirect(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  const int n = b.nranks();
  if (t.type != CollType::AllReduce || !sched::directAllReduceRanks(n))
    return fail(ncclInternalError, "direct schedule requested for %s on %d ranks", collName(t.type), n);
  if (t.count == 0) return ncclSuccess;
  const size_t esz = typeSize(t.dtype);
  const uint64_t chunk = halfFifoElems(b, ConnClass::Direct, d.proto, esz);
  for (int dist = 1; dist < n; dist *= 2) {
    const int peer = b.rank() ^ dist;
    sched::Segment s = b.segment(t, sched::SegmentKind::DirectPair);
    s.count = t.count;
    s.roundElems = chunk;
    s.nranks = 2;
    if (dist > 1) s.flags |= sched::kSegPairFromDst;
    if (dist * 2 < n) s.flags |= sched::kSegPairNotLast;
    CHORUS_CHECK(b.recvFrom(ConnClass::Direct, d.proto, 0, peer, &s.conn[0]));
    CHORUS_CHECK(b.sendTo(ConnClass::Direct, d.proto, 0, peer, &s.conn[1]));
    b.lane(ConnClass::Direct, d.proto, 0, b.rank() ^ 1).segments.push_back(s);  // one lane: in order
  }
  return ncclSuccess;
}

}  // namespace chorus
