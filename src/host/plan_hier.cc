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
// One lane per channel runs the three phases round by round, each round
// being G chunks that fit in half a FIFO. Each phase has its own connectors
// (distinct channel ids), so every connector carries one ring schedule in
// order, as a plain ring's does. PreMulSum is applied where the local input
// first enters a reduction (phase 1, or phase 2 when G = 1); the average's
// division once, where the final value is produced.
#include <algorithm>

#include "core/result.h"
#include "graph/links.h"
#include "host/plan_builder.h"
#include "sched/ring.h"

namespace chorus {
namespace {

using sched::RingAction;

// Connector channel ids of the three phases (ring channels use 0..31).
constexpr int kIntraScatterBase = 256;
constexpr int kInterBase = 512;
constexpr int kIntraGatherBase = 768;

struct PhaseConn {
  RecvConnector* recv = nullptr;
  SendConnector* send = nullptr;
};

ncclResult_t connect(PlanBuilder& b, Proto proto, int id, int prev, int next, PhaseConn* out) {
  CHORUS_CHECK(b.recvFrom(ConnClass::Ring, proto, id, prev, &out->recv));
  return b.sendTo(ConnClass::Ring, proto, id, next, &out->send);
}

struct HierCtx {
  explicit HierCtx(const Task& task) : t(task) {}
  const Task& t;
  graph::HierLinks links;
  PhaseConn scatter, inter, gather;
  Lane* lane = nullptr;
  const char* src = nullptr;
  char* dst = nullptr;
  size_t esz = 1;
};

// Phase 1 on [begin, begin+count): rank at local position p ends with its chunk reduced over the host.
void intraScatter(HierCtx& c, size_t begin, size_t count, bool last) {
  const int G = c.links.localSize;
  for (int step = 0; step < sched::ringReduceScatterSteps(G); ++step) {
    const sched::RingStep rs = sched::ringReduceScatterStep(c.links.localPos, G, step);
    const sched::Range chunk = sched::splitEven(count, G, rs.chunk);
    const size_t e = (begin + chunk.begin) * c.esz;
    HostStep s = ringActionStep(c.t, rs.action, c.scatter.recv, c.scatter.send, c.src + e, c.dst + e, chunk.count);
    if (rs.action == RingAction::RecvReduceCopy) s.post = last;
    c.lane->steps.push_back(s);
  }
}

// Phase 2 on this rank's chunk [begin, begin+count): all-reduce across hosts.
void interAllReduce(HierCtx& c, size_t begin, size_t count, bool inputIsLocal) {
  const int H = c.links.interSize;
  const char* in = inputIsLocal ? c.src : c.dst;
  for (int step = 0; step < sched::ringAllReduceSteps(H); ++step) {
    const sched::RingStep rs = sched::ringAllReduceStep(c.links.interPos, H, step);
    const sched::Range chunk = sched::splitEven(count, H, rs.chunk);
    const size_t e = (begin + chunk.begin) * c.esz;
    HostStep s = ringActionStep(c.t, rs.action, c.inter.recv, c.inter.send, in + e, c.dst + e, chunk.count);
    s.preSrc = s.preSrc && inputIsLocal;
    c.lane->steps.push_back(s);
  }
}

// Phase 3 on [begin, begin+count): every local position's chunk to every rank of the host.
void intraGather(HierCtx& c, size_t begin, size_t count) {
  const int G = c.links.localSize;
  for (int step = 0; step < sched::ringAllGatherSteps(G); ++step) {
    const sched::RingStep rs = sched::ringAllGatherStep(c.links.localPos, G, step);
    const sched::Range chunk = sched::splitEven(count, G, rs.chunk);
    const size_t e = (begin + chunk.begin) * c.esz;
    c.lane->steps.push_back(
        ringActionStep(c.t, rs.action, c.gather.recv, c.gather.send, c.dst + e, c.dst + e, chunk.count));
  }
}

ncclResult_t hierChannel(PlanBuilder& b, const Task& t, const TuneDecision& d, const graph::CommGraph& g, int ch,
                         sched::Range range) {
  HierCtx c(t);
  c.links = graph::hierLinks(g, ch, b.rank());
  c.esz = typeSize(t.dtype);
  c.src = static_cast<const char*>(t.sendbuff);
  c.dst = static_cast<char*>(t.recvbuff);
  const int G = c.links.localSize, H = c.links.interSize;
  c.lane = &b.lane(ConnClass::Ring, d.proto, kIntraScatterBase + ch);
  if (G > 1) {
    CHORUS_CHECK(connect(b, d.proto, kIntraScatterBase + ch, c.links.localPrev, c.links.localNext, &c.scatter));
    CHORUS_CHECK(connect(b, d.proto, kIntraGatherBase + ch, c.links.localPrev, c.links.localNext, &c.gather));
  }
  if (H > 1) CHORUS_CHECK(connect(b, d.proto, kInterBase + ch, c.links.interPrev, c.links.interNext, &c.inter));
  const size_t roundElems = ringChunkElems(b, d.proto, c.esz) * static_cast<size_t>(G);
  for (size_t off = 0; off < range.count; off += roundElems) {
    const size_t begin = range.begin + off;
    const size_t count = std::min(roundElems, range.count - off);
    if (G > 1) intraScatter(c, begin, count, H == 1);
    const sched::Range mine = sched::splitEven(count, G, c.links.localPos);
    if (H > 1) interAllReduce(c, begin + mine.begin, mine.count, G == 1);
    if (G > 1) intraGather(c, begin, count);
  }
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
