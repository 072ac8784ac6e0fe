// Hierarchical AllReduce ("hier"): for H hosts of G ranks each,
//   1. reduce-scatter on the host's local ring: local position p ends with
//      chunk p of the round reduced over the host (G-1 steps, intra-host);
//   2. all-reduce of chunk p on the inter-host ring of local position p
//      (the ranks at position p of every host): 2(H-1) steps, each rank
//      moving only 1/G of the data over the network, and all G positions
//      using the network at once (one NIC each when the host has G NICs);
//   3. all-gather on the local ring (G-1 steps).
// Against a flat ring of n = G*H ranks it has (G-1)+(H-1) hops of latency
// per half instead of n-1, for the same bytes on the network.
//
// One lane per channel runs the three phases round by round (one Hier
// segment, src/sched/segment.h), each round being G chunks that fit in half
// a FIFO. Each phase has its own connectors
// (distinct channel ids), so every connector carries one ring schedule in
// order, as a plain ring's does. PreMulSum is applied where the local input
// first enters a reduction (phase 1, or phase 2 when G = 1); the average's
// division once, where the final value is produced.
#include <algorithm>

#include "core/result.h"
#include "graph/links.h"
#include "plan/plan_builder.h"
#include "sched/ring.h"

namespace chorus {
namespace {

// Connector channel ids of the three phases (ring channels use 0..31).
constexpr int kIntraScatterBase = 256;
constexpr int kInterBase = 512;
constexpr int kIntraGatherBase = 768;

ncclResult_t connect(PlanBuilder& b, Proto proto, int id, int prev, int next, int16_t* recv, int16_t* send) {
  CHORUS_CHECK(b.recvFrom(ConnClass::Ring, proto, id, prev, recv));
  return b.sendTo(ConnClass::Ring, proto, id, next, send);
}

ncclResult_t hierChannel(PlanBuilder& b, const Task& t, const TuneDecision& d, const graph::CommGraph& g, int ch,
                         sched::Range range) {
  const graph::HierLinks links = graph::hierLinks(g, ch, b.rank());
  const int G = links.localSize, H = links.interSize;
  sched::Segment s = b.segment(t, sched::SegmentKind::Hier);
  s.begin = range.begin;
  s.count = range.count;
  s.nranks = G;
  s.pos = links.localPos;
  s.nranks2 = H;
  s.pos2 = links.interPos;
  s.roundElems = halfFifoElems(b, ConnClass::Ring, d.proto, typeSize(t.dtype)) * static_cast<size_t>(G);
  if (t.sendbuff == t.recvbuff) s.flags |= sched::kSegInPlace;
  if (G > 1) {
    CHORUS_CHECK(connect(b, d.proto, kIntraScatterBase + ch, links.localPrev, links.localNext,
                         &s.conn[sched::kHierScatterRecv], &s.conn[sched::kHierScatterSend]));
    CHORUS_CHECK(connect(b, d.proto, kIntraGatherBase + ch, links.localPrev, links.localNext,
                         &s.conn[sched::kHierGatherRecv], &s.conn[sched::kHierGatherSend]));
  }
  if (H > 1)
    CHORUS_CHECK(connect(b, d.proto, kInterBase + ch, links.interPrev, links.interNext, &s.conn[sched::kHierInterRecv],
                         &s.conn[sched::kHierInterSend]));
  b.lane(ConnClass::Ring, d.proto, kIntraScatterBase + ch).segments.push_back(s);
  return ncclSuccess;
}

}  // namespace

ncclResult_t expandHier(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  if (t.type != CollType::AllReduce) return fail(ncclInternalError, "hier schedule requested for %s", collName(t.type));
  const graph::CommGraph* g = b.graph();
  // Without hierarchical groups (no graph, uneven hosts) the flat ring is the same schedule.
  if (g == nullptr || !graph::hierSupported(*g)) return expandRing(b, t, d);
  const size_t align = std::max<size_t>(1, 64 / typeSize(t.dtype));
  for (int ch = 0; ch < d.nchannels; ++ch) {
    const sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, align);
    if (range.count > 0) CHORUS_CHECK(hierChannel(b, t, d, *g, ch, range));
  }
  return ncclSuccess;
}

}  // namespace chorus
