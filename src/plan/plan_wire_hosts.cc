// The two-level form of a compressed direct reduction (docs/wire.md), for
// communicators spread over H hosts of G ranks each (G, H > 1). The shards
// and their owners are the flat form's (plan_wire.cc); what changes is who
// sends what over the network:
//   - for a shard of a rank q on this host, every other rank of the host
//     sends its contribution to q as an fp32 partial (WirePartial), exact;
//   - for a shard of a rank q on another host, the rank of this host at q's
//     local position (the combiner) receives the other local ranks' fp32
//     partials, adds its own, encodes the host's sum once with its residual
//     and sends it to q (WireHostSum), so one encoded contribution per host
//     and shard crosses the network instead of G;
//   - the owner combines its host's partials, the other hosts' sums and its
//     own input, and (AllReduce) sends the encoded result to its host's
//     ranks and to the combiner of every other host (WireOwner);
//   - a combiner decodes the result of a shard of its local position and
//     passes the same encoding on to its host's ranks (WireRelay); the others
//     decode it from the owner or the combiner (WireGather).
// Every value is still quantized once on its way in (as part of its host's
// sum) and once on its way out, so the flat form's error bound holds (the
// block scale of a sum is at most the sum of the contributions' scales),
// and every rank decodes the owner's one encoding, so all agree. Each
// host's link carries, per direction and phase, (n - G)/n of one rank's
// encoded data instead of the flat form's G (n - G)/n.
//
// Lanes wait only on lanes that never wait on them: partial senders on
// combiners and owners, combiners on partial senders and owners, owners on
// partials, combiners and the result's receivers, relays on owners and their
// host's gatherers, gatherers on owners and relays.
#include <vector>

#include "core/result.h"
#include "graph/links.h"
#include "kernels/common/wire_codec.h"
#include "kernels/common/wire_reduce.h"
#include "plan/plan_builder.h"
#include "plan/wire_geometry.h"
#include "plan/wire_lanes.h"

namespace chorus {
namespace {

using namespace wireplan;  // NOLINT(google-build-using-namespace): the channels and keys of every lane below
using sched::Segment;
using sched::SegmentKind;

// Where every rank sits: its host and its position among the host's ranks
// (channel 0's ring order inside the host).
struct HostMap {
  const graph::CommGraph& g;
  int host(int r) const { return g.hostOfRank[static_cast<size_t>(r)]; }
  int pos(int r) const { return g.ring(0).position[r] - g.ring(0).hostStart[host(r)]; }
  int at(int h, int p) const { return g.ring(0).order[g.ring(0).hostStart[h] + p]; }
  int hosts() const { return g.nhosts; }
  int perHost() const { return g.ranksPerHost; }
};

struct Ctx {
  PlanBuilder& b;
  const Task& t;
  HostMap map;
  int n, me;
  uint32_t slot;
  uint64_t pieceElems;
};

Segment shardSegment(const Ctx& c, SegmentKind kind, int q) {
  const WireShard sh = wireShard(c.t, c.n, q);
  Segment s = c.b.segment(c.t, kind);
  s.begin = kind == SegmentKind::WireGather || kind == SegmentKind::WireRelay ? sh.dstBegin : sh.srcBegin;
  s.count = sh.count;
  s.roundElems = c.pieceElems;
  s.pos = q;
  s.nranks = c.n;
  return s;
}

// The other ranks of this rank's host.
template <typename F>
void forLocalPeers(const Ctx& c, F&& f) {
  const int h = c.map.host(c.me);
  for (int p = 0; p < c.map.perHost(); ++p)
    if (c.map.at(h, p) != c.me) f(c.map.at(h, p));
}

// The combiner's lane for remote shard q: partials in, the host's sum out.
ncclResult_t hostSum(const Ctx& c, int q) {
  Segment s = shardSegment(c, SegmentKind::WireHostSum, q);
  s.pos = c.me;  // the combine's own input (OwnerBlock::self)
  std::vector<int32_t> table = ownerTable(c.n);
  const int channel = kPartialBase + c.map.host(q);
  ncclResult_t res = ncclSuccess;
  forLocalPeers(c, [&](int l) {
    int16_t id = sched::kNoConn;
    if (res == ncclSuccess) res = c.b.connect(key(channel, l), false, c.slot, kSlots, &id);
    table[static_cast<size_t>(l)] = id;
    table[static_cast<size_t>(2 * c.n + l)] = 1;
    if (s.conn[0] == sched::kNoConn) s.conn[0] = id;
  });
  CHORUS_CHECK(res);
  int16_t out = sched::kNoConn;
  CHORUS_CHECK(c.b.connect(key(kScatterChannel, q), true, c.slot, kSlots, &out));
  table[static_cast<size_t>(c.n + q)] = out;
  s.conn[1] = out;
  s.ringTable = c.b.addTableEntries(table.data(), 3 * c.n);
  wireplan::lane(c.b, kScatterChannel, q, true, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// This rank's contribution to q's shard: an fp32 partial to the host rank
// that combines it (q itself when it is on this host), or the host's sum.
ncclResult_t contribute(const Ctx& c, int q) {
  const int hq = c.map.host(q), hm = c.map.host(c.me);
  if (hq != hm && c.map.pos(q) == c.map.pos(c.me)) return hostSum(c, q);
  const int to = hq == hm ? q : c.map.at(hm, c.map.pos(q));
  Segment s = shardSegment(c, SegmentKind::WirePartial, q);
  CHORUS_CHECK(c.b.connect(key(kPartialBase + hq, to), true, c.slot, kSlots, &s.conn[1]));
  wireplan::lane(c.b, kPartialBase + hq, to, true, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// The shard's result from its owner (on this host) or from this host's
// relay; or, at q's local position on another host, the relay itself.
ncclResult_t receiveResult(const Ctx& c, int q) {
  const int hq = c.map.host(q), hm = c.map.host(c.me);
  const bool relays = hq != hm && c.map.pos(q) == c.map.pos(c.me);
  Segment s = shardSegment(c, relays ? SegmentKind::WireRelay : SegmentKind::WireGather, q);
  if (relays) {
    CHORUS_CHECK(c.b.connect(key(kGatherChannel, q), false, c.slot, kSlots, &s.conn[0]));
    std::vector<int32_t> table(2 * static_cast<size_t>(c.n), sched::kNoConn);
    ncclResult_t res = ncclSuccess;
    forLocalPeers(c, [&](int l) {
      int16_t id = sched::kNoConn;
      if (res == ncclSuccess) res = c.b.connect(key(kLocalGatherBase + hq, l), true, c.slot, kSlots, &id);
      table[static_cast<size_t>(c.n + l)] = id;
      if (s.conn[1] == sched::kNoConn) s.conn[1] = id;
    });
    CHORUS_CHECK(res);
    s.ringTable = c.b.addTableEntries(table.data(), 2 * c.n);
  } else {
    const int from = hq == hm ? q : c.map.at(hm, c.map.pos(q));
    CHORUS_CHECK(c.b.connect(key(kLocalGatherBase + hq, from), false, c.slot, kSlots, &s.conn[0]));
  }
  wireplan::lane(c.b, kGatherChannel, q, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// The owner: partials from this host, sums from the other hosts' ranks at
// this local position; the result to this host's ranks and to those ranks.
ncclResult_t own(const Ctx& c, bool gathers) {
  const WireShard mine = wireShard(c.t, c.n, c.me);
  Segment s = shardSegment(c, SegmentKind::WireOwner, c.me);
  s.blockElems = mine.dstBegin;
  std::vector<int32_t> table = ownerTable(c.n);
  const int hm = c.map.host(c.me);
  auto link = [&](int peer, int inChannel, int outChannel, bool partial) -> ncclResult_t {
    int16_t id = sched::kNoConn;
    CHORUS_CHECK(c.b.connect(key(inChannel, peer), false, c.slot, kSlots, &id));
    table[static_cast<size_t>(peer)] = id;
    table[static_cast<size_t>(2 * c.n + peer)] = partial ? 1 : 0;
    if (s.conn[0] == sched::kNoConn) s.conn[0] = id;
    if (!gathers) return ncclSuccess;
    CHORUS_CHECK(c.b.connect(key(outChannel, peer), true, c.slot, kSlots, &id));
    table[static_cast<size_t>(c.n + peer)] = id;
    if (s.conn[1] == sched::kNoConn) s.conn[1] = id;
    return ncclSuccess;
  };
  ncclResult_t res = ncclSuccess;
  forLocalPeers(c, [&](int l) {
    if (res == ncclSuccess) res = link(l, kPartialBase + hm, kLocalGatherBase + hm, true);
  });
  CHORUS_CHECK(res);
  for (int h = 0; h < c.map.hosts(); ++h)
    if (h != hm) CHORUS_CHECK(link(c.map.at(h, c.map.pos(c.me)), kScatterChannel, kGatherChannel, false));
  s.ringTable = c.b.addTableEntries(table.data(), 3 * c.n);
  wireplan::lane(c.b, kScatterChannel, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

}  // namespace

bool wireAcrossHosts(const PlanBuilder& b, const Task& t) {
  if (!wireplan::acrossHostsForm(b) || b.graph()->nhosts > wireplan::kMaxHosts) return false;
  if (t.type != CollType::AllReduce && t.type != CollType::ReduceScatter) return false;
  return wireFormat(t) != wire::Format::Native && !t.wire.deterministic;
}

ncclResult_t expandWireHosts(PlanBuilder& b, const Task& t) {
  const uint32_t slot = wireplan::slotBytes(b);
  // Whole blocks whose fp32 partials fill a slot; their encodings are smaller.
  const Ctx c{b,
              t,
              HostMap{*b.graph()},
              b.nranks(),
              b.rank(),
              slot,
              wire::pieceElemsFor(wire::Format::Native, wire::partialBytes(1), slot)};
  const bool gathers = t.type == CollType::AllReduce;
  for (int q = 0; q < c.n; ++q) {
    if (q == c.me || wireShard(t, c.n, q).count == 0) continue;
    CHORUS_CHECK(contribute(c, q));
    if (gathers) CHORUS_CHECK(receiveResult(c, q));
  }
  if (wireShard(t, c.n, c.me).count == 0) return ncclSuccess;
  return own(c, gathers);
}

}  // namespace chorus
