// Deterministic mode's ReduceScatter and Reduce across hosts (docs/wire.md):
// the AllReduce chain's idea (plan_wire_chain.cc) without a gather phase,
// for communicators whose H hosts hold consecutive ranks, G each.
//
// The flat form sends every rank's value for a shard to its owner, so each
// host's link carries G(n - G)/n of the data per direction. Here the
// rank-order combination of shard q (ReduceScatter: rank q's output block;
// Reduce: the whole buffer, owned by the root) runs through the ranks at q's
// local position p on every host, in host order:
//   - every other rank of a host sends its value to the host's rank at
//     position p, the host's link (WireSend, native, inside the host);
//   - the link of host h combines the previous link's partial (none on host
//     0) with its host's values and its own in rank order, and sends the
//     unrounded partial (compute type) to the link of host h + 1 (WireChain);
//   - the last host's link is the owner when q is that rank (WireOwner: it
//     finishes, divides once for avg and rounds once); otherwise it sends the
//     whole partial to q (WireChain), which finishes it (WireOwner without
//     an input of its own: Segment::pos -1).
// So the owner makes exactly the flat form's combination, term for term, and
// results are bit-identical to it. A host's link carries about one partial
// of every shard per direction (n blocks, against a ring's n - 1), where the
// flat form carries G(n - G).
//
// Lanes: a sender per link it feeds, one lane for the links a rank is (its
// shards in ascending order, as its senders and the previous link send
// them), one for its own shard's finish. Links wait on senders and on the
// previous link, and on the next link's or the owner's free slots; the owner
// on the last link. No lane waits on one that waits on it.
#include <vector>

#include "core/result.h"
#include "plan/plan_builder.h"
#include "plan/wire_geometry.h"
#include "plan/wire_lanes.h"

namespace chorus {
namespace {

using namespace wireplan;  // NOLINT(google-build-using-namespace): the channels and keys of every lane below
using sched::Segment;
using sched::SegmentKind;

Segment shardSegment(const ChainCtx& c, SegmentKind kind, int q) {
  const WireShard sh = wireShard(c.t, c.n, q);
  Segment s = c.b.segment(c.t, kind);
  s.begin = sh.srcBegin;
  s.blockElems = sh.dstBegin;  // WireOwner: where the result goes
  s.count = sh.count;
  s.roundElems = c.pieceElems;
  s.pos = c.me;
  s.nranks = c.n;
  return s;
}

// This rank's value for shard q to its host's link at q's position.
ncclResult_t sendValue(const ChainCtx& c, int q) {
  const int to = c.at(c.host(c.me), c.pos(q));
  Segment s = shardSegment(c, SegmentKind::WireSend, q);
  s.pos = to;
  CHORUS_CHECK(c.b.connect(key(kChainValueChannel, to), true, c.slot, kSlots, &s.conn[1]));
  wireplan::lane(c.b, kChainValueChannel, to, true, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// This rank as its host's link for shard q: the owner on the last host when
// q is this rank, else a chain link to the next host's link or to q.
ncclResult_t link(const ChainCtx& c, int q) {
  const int h = c.host(c.me), p = c.pos(c.me);
  const bool owner = h == c.H - 1 && q == c.me;
  Segment s = shardSegment(c, owner ? SegmentKind::WireOwner : SegmentKind::WireChain, q);
  std::vector<int32_t> table = ownerTable(c.n);
  if (h > 0) CHORUS_CHECK(c.input(s, table, c.at(h - 1, p), kChainPartialChannel, true));
  for (int l = 0; l < c.G; ++l)
    if (l != p) CHORUS_CHECK(c.input(s, table, c.at(h, l), kChainValueChannel, false));
  if (!owner) {
    const bool last = h + 1 == c.H;
    CHORUS_CHECK(c.output(s, table, last ? q : c.at(h + 1, p), last ? kChainFinishChannel : kChainPartialChannel));
  }
  s.ringTable = c.b.addTableEntries(table.data(), 3 * c.n);
  wireplan::lane(c.b, kChainPartialChannel, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// This rank's own shard, when its host is not the last: the last link's
// whole partial in, finished (no input of this rank's own: it went into
// its host's partial on the way).
ncclResult_t finish(const ChainCtx& c) {
  Segment s = shardSegment(c, SegmentKind::WireOwner, c.me);
  s.pos = -1;
  std::vector<int32_t> table = ownerTable(c.n);
  CHORUS_CHECK(c.input(s, table, c.at(c.H - 1, c.pos(c.me)), kChainFinishChannel, true));
  s.ringTable = c.b.addTableEntries(table.data(), 3 * c.n);
  wireplan::lane(c.b, kChainFinishChannel, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

}  // namespace

bool wireChainToOwnersAcrossHosts(const PlanBuilder& b, const Task& t) {
  if (t.type != CollType::ReduceScatter && t.type != CollType::Reduce) return false;
  if (!t.wire.deterministic || wireFormat(t) != wire::Format::Native) return false;
  return wireChainLayout(b);
}

ncclResult_t expandWireChainToOwners(PlanBuilder& b, const Task& t) {
  const ChainCtx c = chainCtx(b, t);
  for (int q = 0; q < c.n; ++q) {
    if (wireShard(t, c.n, q).count == 0) continue;
    if (c.pos(q) != c.pos(c.me))
      CHORUS_CHECK(sendValue(c, q));
    else
      CHORUS_CHECK(link(c, q));
  }
  if (wireShard(t, c.n, c.me).count > 0 && c.host(c.me) != c.H - 1) CHORUS_CHECK(finish(c));
  return ncclSuccess;
}

}  // namespace chorus
