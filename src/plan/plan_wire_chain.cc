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
// slots, relays on the previous relay and on the next relay's and the
// gatherers' free slots, gatherers on the owner or a relay.
#include <algorithm>
#include <vector>

#include "core/result.h"
#include "graph/links.h"
#include "plan/plan_builder.h"
#include "plan/wire_geometry.h"
#include "plan/wire_lanes.h"

namespace chorus {
namespace {

using namespace wireplan;  // NOLINT(google-build-using-namespace): the channels and keys of every lane below
using sched::Segment;
using sched::SegmentKind;

struct Chain {
  PlanBuilder& b;
  const Task& t;
  int n, me, G, H;
  uint32_t slot;
  uint64_t pieceElems;
  int host(int r) const { return r / G; }
  int pos(int r) const { return r % G; }
  int at(int h, int p) const { return h * G + p; }
};

// Shard p of the buffer: whole wire blocks.
Segment shardSegment(const Chain& c, SegmentKind kind, int p) {
  const sched::Range r = sched::splitAligned(c.t.count, c.G, p, wire::kWireBlockElems);
  Segment s = c.b.segment(c.t, kind);
  s.begin = r.begin;
  s.count = r.count;
  s.roundElems = c.pieceElems;
  s.pos = c.me;  // the combination's own input (OwnerBlock::self)
  s.nranks = c.n;
  return s;
}

// Connects the table entry of peer's input (partial: in the compute type).
ncclResult_t tableEntry(const Chain& c, Segment& s, std::vector<int32_t>& table, int peer, int inChannel,
                        bool partial) {
  int16_t id = sched::kNoConn;
  CHORUS_CHECK(c.b.connect(key(inChannel, peer), false, c.slot, kSlots, &id));
  table[static_cast<size_t>(peer)] = id;
  table[2 * static_cast<size_t>(c.n) + static_cast<size_t>(peer)] = partial ? 1 : 0;
  if (s.conn[0] == sched::kNoConn) s.conn[0] = id;
  return ncclSuccess;
}

// Connects the table entry at base + peer that sends this segment's output to peer.
ncclResult_t resultEntry(const Chain& c, Segment& s, std::vector<int32_t>& table, size_t base, int peer,
                         int outChannel) {
  int16_t id = sched::kNoConn;
  CHORUS_CHECK(c.b.connect(key(outChannel, peer), true, c.slot, kSlots, &id));
  table[base + static_cast<size_t>(peer)] = id;
  if (s.conn[1] == sched::kNoConn) s.conn[1] = id;
  return ncclSuccess;
}

// This rank's link of its shard's chain, or on the last host its owner.
ncclResult_t link(const Chain& c) {
  const int h = c.host(c.me), p = c.pos(c.me);
  const bool owner = h == c.H - 1;
  Segment s = shardSegment(c, owner ? SegmentKind::WireOwner : SegmentKind::WireChain, p);
  if (owner) s.blockElems = s.begin;
  if (s.count == 0) return ncclSuccess;
  std::vector<int32_t> table = ownerTable(c.n);
  if (h > 0) CHORUS_CHECK(tableEntry(c, s, table, c.at(h - 1, p), kChainPartialChannel, true));
  for (int l = 0; l < c.G; ++l)
    if (l != p) CHORUS_CHECK(tableEntry(c, s, table, c.at(h, l), kChainValueChannel, false));
  const auto outs = static_cast<size_t>(c.n);
  if (owner) {
    for (int l = 0; l < c.G; ++l)
      if (l != p) CHORUS_CHECK(resultEntry(c, s, table, outs, c.at(h, l), kChainLocalResultChannel));
    CHORUS_CHECK(resultEntry(c, s, table, outs, c.at(0, p), kChainResultChannel));
  } else {
    CHORUS_CHECK(resultEntry(c, s, table, outs, c.at(h + 1, p), kChainPartialChannel));
  }
  s.ringTable = c.b.addTableEntries(table.data(), 3 * c.n);
  wireplan::lane(c.b, kChainPartialChannel, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// Position p of a host before the last: the result in, to the host and on.
ncclResult_t relay(const Chain& c) {
  const int h = c.host(c.me), p = c.pos(c.me);
  Segment s = shardSegment(c, SegmentKind::WireRelay, p);
  if (s.count == 0) return ncclSuccess;
  const int from = h == 0 ? c.at(c.H - 1, p) : c.at(h - 1, p);
  CHORUS_CHECK(c.b.connect(key(kChainResultChannel, from), false, c.slot, kSlots, &s.conn[0]));
  std::vector<int32_t> table(2 * static_cast<size_t>(c.n), sched::kNoConn);
  const auto outs = static_cast<size_t>(c.n);
  for (int l = 0; l < c.G; ++l)
    if (l != p) CHORUS_CHECK(resultEntry(c, s, table, outs, c.at(h, l), kChainLocalResultChannel));
  if (h + 1 < c.H - 1) CHORUS_CHECK(resultEntry(c, s, table, outs, c.at(h + 1, p), kChainResultChannel));
  s.ringTable = c.b.addTableEntries(table.data(), 2 * c.n);
  wireplan::lane(c.b, kChainResultChannel, -1, false, c.slot).segments.push_back(s);
  return ncclSuccess;
}

// Shard l of this host's position-l rank: this rank's value to it, its result back.
ncclResult_t peerShard(const Chain& c, int l) {
  const int peer = c.at(c.host(c.me), l);
  Segment send = shardSegment(c, SegmentKind::WireSend, l);
  if (send.count == 0) return ncclSuccess;
  send.pos = peer;
  CHORUS_CHECK(c.b.connect(key(kChainValueChannel, peer), true, c.slot, kSlots, &send.conn[1]));
  wireplan::lane(c.b, kChainValueChannel, peer, true, c.slot).segments.push_back(send);
  Segment gather = shardSegment(c, SegmentKind::WireGather, l);
  gather.pos = peer;
  CHORUS_CHECK(c.b.connect(key(kChainLocalResultChannel, peer), false, c.slot, kSlots, &gather.conn[0]));
  wireplan::lane(c.b, kChainLocalResultChannel, peer, false, c.slot).segments.push_back(gather);
  return ncclSuccess;
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

bool wireChainAcrossHosts(const PlanBuilder& b, const Task& t) {
  const graph::CommGraph* g = b.graph();
  if (!b.config().wireHosts || g == nullptr || !graph::hierSupported(*g)) return false;
  if (t.type != CollType::AllReduce || !t.wire.deterministic || wireFormat(t) != wire::Format::Native) return false;
  if (g->nranks != b.nranks() || g->ranksPerHost < 2 || g->nhosts < 2 || g->nranks != g->ranksPerHost * g->nhosts)
    return false;
  return consecutiveHosts(*g);
}

ncclResult_t expandWireChain(PlanBuilder& b, const Task& t) {
  const graph::CommGraph& g = *b.graph();
  const uint32_t slot = wireplan::slotBytes(b);
  // Whole blocks whose widest payload (a partial in the compute type, or a
  // value with PreMulSum's product) fills a slot.
  const uint32_t widest = std::max(wireComputeBytes(t), wireScatterElemBytes(t));
  const Chain c{b,
                t,
                b.nranks(),
                b.rank(),
                g.ranksPerHost,
                g.nhosts,
                slot,
                wire::pieceElemsFor(wire::Format::Native, widest, slot)};
  for (int l = 0; l < c.G; ++l)
    if (l != c.pos(c.me)) CHORUS_CHECK(peerShard(c, l));
  CHORUS_CHECK(link(c));
  if (c.host(c.me) < c.H - 1) CHORUS_CHECK(relay(c));
  return ncclSuccess;
}

}  // namespace chorus
