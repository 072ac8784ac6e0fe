// Deterministic mode's AllReduce across hosts (docs/wire.md): a chain
// through the hosts in rank order, for communicators whose H hosts hold
// consecutive ranks, G each (host k: ranks kG .. kG + G - 1; G, H > 1).
//
// The flat form sends every rank's own value to the owner of each shard, so
// each host's link carries G(n - G)/n of the buffer per direction and phase.
// A rank-order combination cannot be cut into per-host sums (floating-point
// addition does not associate), but its prefix can travel: the combination
// of ranks 0 .. kG - 1, unrounded in the compute type, is all that host k
// needs from the hosts before it. So the buffer is cut into G shards, and
// shard p runs through the ranks at local position p of every host:
//   - every other rank of the host sends its value for shard p to the host's
//     rank at position p (WireSend, native);
//   - that rank combines the previous host's partial (none on host 0), the
//     host's values and its own in rank order and sends the unrounded partial
//     to position p of the next host (WireChain);
//   - on the last host that rank is the owner: it finishes the combination,
//     rounds once (avg: divides once) and sends the result to its host's
//     ranks and to position p of host 0 (WireOwner);
//   - position p of hosts 0 .. H - 2 takes the result into its output and
//     passes it on to its host's ranks and to position p of the next host up
//     to host H - 2 (WireRelay); the others take it from their position p
//     rank (WireGather).
// The owner's combination is exactly the single owner's of the flat form,
// so results are bit-identical to it. Per direction a host's link carries
// at most twice the buffer (its partial out and the result on; hosts 1 ..
// H - 2 also take a partial in and the result), against 2(H - 1)/H for a
// ring, so this form pays off from 2 ranks per host.
//
// Lanes wait only on lanes that never wait on them: senders on chain links,
// chain links on senders, on the previous link and on the next link's free
// slots, the owner on its inputs and on the relays' and gatherers' free
// slots, relays on the relay feeding them and on the free slots of the
// relays and gatherers they feed (a tree), gatherers on the owner or a
// relay. Every share has connectors and lanes of its own.
#include <algorithm>
#include <vector>

#include "core/result.h"
#include "plan/plan_builder.h"
#include "plan/wire_chain_routes.h"
#include "plan/wire_geometry.h"
#include "plan/wire_lanes.h"

namespace chorus {
namespace {

using namespace wireplan;  // NOLINT(google-build-using-namespace): the channels and keys of every lane below
using sched::Segment;
using sched::SegmentKind;
using wirechain::Route;

// One share of one shard on its route, and its connector channels.
struct ShareOf {
  const Route& route;
  int p;                 // the shard (local position)
  sched::Range range;    // its elements
  uint16_t channel = 0;  // values; + 1 partials, + 2 results between hosts, + 3 results inside a host
  int owner() const { return static_cast<int>(route.absorb.size()) - 1; }
};

Segment shareSegment(const ChainCtx& c, const ShareOf& sh, SegmentKind kind) {
  Segment s = c.b.segment(c.t, kind);
  s.begin = sh.range.begin;
  s.count = sh.range.count;
  s.roundElems = c.pieceElems;
  s.pos = c.me;  // the combination's own input (OwnerBlock::self)
  s.nranks = c.n;
  return s;
}

// The result's ways out of host h at position p: its other ranks and the
// hosts the route feeds from h.
ncclResult_t resultOuts(const ChainCtx& c, const ShareOf& sh, Segment& s, std::vector<int32_t>& table) {
  const int h = c.host(c.me);
  for (int l = 0; l < c.G; ++l)
    if (l != sh.p) CHORUS_CHECK(c.output(s, table, c.at(h, l), sh.channel + 3));
  for (int k = 0; k < c.H; ++k)
    if (sh.route.parent[k] == h) CHORUS_CHECK(c.output(s, table, c.at(k, sh.p), sh.channel + 2));
  return ncclSuccess;
}

// This rank as its host's link of the share, or on the last host its owner.
ncclResult_t link(const ChainCtx& c, const ShareOf& sh) {
  const int h = c.host(c.me);
  const bool owner = h == sh.owner();
  Segment s = shareSegment(c, sh, owner ? SegmentKind::WireOwner : SegmentKind::WireChain);
  if (owner) s.blockElems = s.begin;
  std::vector<int32_t> table = ownerTable(c.n);
  const int before = wirechain::previousLink(sh.route, h);
  if (before >= 0) CHORUS_CHECK(c.input(s, table, c.at(before, sh.p), sh.channel + 1, true));
  for (int k = 0; k < c.H; ++k) {
    if (sh.route.absorb[k] != h) continue;
    for (int l = 0; l < c.G; ++l)
      if (c.at(k, l) != c.me) CHORUS_CHECK(c.input(s, table, c.at(k, l), sh.channel, false));
  }
  if (owner) {
    CHORUS_CHECK(resultOuts(c, sh, s, table));
  } else {
    const int next = wirechain::nextLink(sh.route, h);
    CHORUS_CHECK(c.output(s, table, c.at(next, sh.p), sh.channel + 1));
  }
  s.ringTable = c.b.addTableEntries(table.data(), 3 * c.n);
  wireplan::lane(c.b, sh.channel + 1, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// Position p of a host other than the owner's: the result in, to the host and on.
ncclResult_t relay(const ChainCtx& c, const ShareOf& sh) {
  const int h = c.host(c.me);
  Segment s = shareSegment(c, sh, SegmentKind::WireRelay);
  CHORUS_CHECK(c.b.connect(key(sh.channel + 2, c.at(sh.route.parent[h], sh.p)), false, c.slot, kSlots, &s.conn[0]));
  std::vector<int32_t> table(2 * static_cast<size_t>(c.n), sched::kNoConn);
  CHORUS_CHECK(resultOuts(c, sh, s, table));
  s.ringTable = c.b.addTableEntries(table.data(), 2 * c.n);
  wireplan::lane(c.b, sh.channel + 2, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// This rank's values to the share's link, unless it is that link.
ncclResult_t sendValues(const ChainCtx& c, const ShareOf& sh) {
  const int to = c.at(sh.route.absorb[c.host(c.me)], sh.p);
  if (to == c.me) return ncclSuccess;
  Segment s = shareSegment(c, sh, SegmentKind::WireSend);
  s.pos = to;
  CHORUS_CHECK(c.b.connect(key(sh.channel, to), true, c.slot, kSlots, &s.conn[1]));
  wireplan::lane(c.b, sh.channel, to, true, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// The result of a shard of another position, from this host's rank there.
ncclResult_t gather(const ChainCtx& c, const ShareOf& sh) {
  const int from = c.at(c.host(c.me), sh.p);
  Segment s = shareSegment(c, sh, SegmentKind::WireGather);
  s.pos = from;
  CHORUS_CHECK(c.b.connect(key(sh.channel + 3, from), false, c.slot, kSlots, &s.conn[0]));
  wireplan::lane(c.b, sh.channel + 3, from, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

ncclResult_t expandShare(const ChainCtx& c, const ShareOf& sh) {
  if (sh.range.count == 0) return ncclSuccess;
  const int h = c.host(c.me);
  CHORUS_CHECK(sendValues(c, sh));
  if (c.pos(c.me) != sh.p) return gather(c, sh);
  if (sh.route.absorb[h] == h) CHORUS_CHECK(link(c, sh));
  if (h != sh.owner()) CHORUS_CHECK(relay(c, sh));
  return ncclSuccess;
}

// Elements [first, first + twelfths) / 12 of a shard's whole blocks.
sched::Range shareRange(sched::Range shard, int first, int twelfths) {
  const uint64_t blocks = sched::ceilDiv(shard.count, wire::kWireBlockElems);
  const uint64_t b0 = blocks * static_cast<uint64_t>(first) / 12;
  const uint64_t b1 = blocks * static_cast<uint64_t>(first + twelfths) / 12;
  const uint64_t e0 = std::min<uint64_t>(b0 * wire::kWireBlockElems, shard.count);
  const uint64_t e1 = std::min<uint64_t>(b1 * wire::kWireBlockElems, shard.count);
  return sched::Range{shard.begin + e0, e1 - e0};
}

// Whether every host holds G consecutive ranks (host k: kG .. kG + G - 1).
bool consecutiveHosts(const graph::CommGraph& g) {
  const int G = g.ranksPerHost;
  std::vector<bool> seen(static_cast<size_t>(g.nhosts), false);
  for (int r = 0; r < g.nranks; ++r) {
    const int h = g.hostOfRank[static_cast<size_t>(r)];
    if (h < 0 || h >= g.nhosts) return false;
    if (r % G == 0) {
      if (seen[static_cast<size_t>(h)]) return false;
      seen[static_cast<size_t>(h)] = true;
    } else if (h != g.hostOfRank[static_cast<size_t>(r - r % G)]) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool wireChainLayout(const PlanBuilder& b) {
  if (!wireplan::acrossHostsForm(b)) return false;
  const graph::CommGraph& g = *b.graph();
  return g.nranks == g.ranksPerHost * g.nhosts && consecutiveHosts(g);
}

bool wireChainAcrossHosts(const PlanBuilder& b, const Task& t) {
  if (t.type != CollType::AllReduce || !t.wire.deterministic || wireFormat(t) != wire::Format::Native) return false;
  return wireChainLayout(b);
}

ncclResult_t expandWireChain(PlanBuilder& b, const Task& t) {
  const ChainCtx c = chainCtx(b, t);
  const uint32_t valueBytes = wireScatterElemBytes(t), partialBytes = wireComputeBytes(t);
  const std::vector<wirechain::Share> mix = wirechain::chooseRoutes(
      c.H, c.G, wirechain::ElemBytes{valueBytes, partialBytes, static_cast<uint32_t>(typeSize(t.dtype))});
  for (int p = 0; p < c.G; ++p) {
    const sched::Range shard = sched::splitAligned(t.count, c.G, p, wire::kWireBlockElems);
    int first = 0;
    for (size_t k = 0; k < mix.size(); ++k) {
      const ShareOf sh{mix[k].route, p, shareRange(shard, first, mix[k].twelfths),
                       static_cast<uint16_t>(kChainBaseChannel + 4 * k)};
      CHORUS_CHECK(expandShare(c, sh));
      first += mix[k].twelfths;
    }
  }
  return ncclSuccess;
}

}  // namespace chorus
