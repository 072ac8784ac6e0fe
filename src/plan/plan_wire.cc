// The direct reductions of docs/wire.md as segments: for every compressed
// wire and for deterministic mode, whatever the tuner would choose.
//
// The reduced data is cut into one shard per owner (AllReduce: every rank's
// share of whole wire blocks; ReduceScatter: its output block; Reduce: all of
// it, owned by the root). A rank sends its contribution to each shard it does
// not own straight to the owner (one WireSend lane per peer), the owner
// combines the contributions of ranks 0..n-1 in that order and, for
// AllReduce, sends the result to every peer (one WireOwner lane), and each
// rank decodes the other shards' results (one WireGather lane per peer). So
// every value is quantized once on its way in and once on its way out,
// whatever the rank count, and the sum's order never depends on the
// algorithm, the channel count or the message size.
//
// Every lane waits only on lanes that never wait on it (senders on the
// owner's receive slots, the owner on its peers' senders and on the
// gatherers' free slots, gatherers on owners), so the FIFOs cannot deadlock.
// The wire connectors are their own (wire_lanes.h's channels of the Direct
// class), so they never share a FIFO with another algorithm's lane in the
// same group. Across hosts, compressed wires take the two-level form of
// plan_wire_hosts.cc, and deterministic AllReduce the chain of
// plan_wire_chain.cc where hosts hold consecutive ranks (ReduceScatter and
// Reduce the chain of plan_wire_chain_rs.cc).
#include <algorithm>
#include <vector>

#include "core/result.h"
#include "kernels/common/wire_codec.h"
#include "plan/plan_builder.h"
#include "plan/wire_geometry.h"
#include "plan/wire_lanes.h"

namespace chorus {
namespace {

using sched::Segment;
using sched::SegmentKind;
using wireplan::key;
using wireplan::kGatherChannel;
using wireplan::kScatterChannel;
using wireplan::kSlots;

}  // namespace

ncclResult_t expandWire(PlanBuilder& b, const Task& t) {
  if (t.type != CollType::AllReduce && t.type != CollType::ReduceScatter && t.type != CollType::Reduce)
    return fail(ncclInternalError, "wire schedule requested for %s", collName(t.type));
  if (wireChainAcrossHosts(b, t)) return expandWireChain(b, t);
  if (wireChainToOwnersAcrossHosts(b, t)) return expandWireChainToOwners(b, t);
  if (wireAcrossHosts(b, t)) return expandWireHosts(b, t);
  const int n = b.nranks(), me = b.rank();
  const uint32_t slot = wireplan::slotBytes(b);
  const WireGeometry g = wireGeometry(t, n, slot);
  const bool gathers = t.type == CollType::AllReduce;
  std::vector<int32_t> table = wireplan::ownerTable(n);
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    const WireShard theirs = wireShard(t, n, q), mine = wireShard(t, n, me);
    if (theirs.count > 0) {  // my contribution to q's shard
      Segment s = b.segment(t, SegmentKind::WireSend);
      CHORUS_CHECK(b.connect(key(kScatterChannel, q), true, slot, kSlots, &s.conn[1]));
      s.begin = theirs.srcBegin;
      s.count = theirs.count;
      s.roundElems = g.pieceElems;
      s.pos = q;
      s.nranks = n;
      wireplan::lane(b, kScatterChannel, q, true, slot).segments.push_back(s);
    }
    if (mine.count > 0) {
      int16_t id = sched::kNoConn;
      CHORUS_CHECK(b.connect(key(kScatterChannel, q), false, slot, kSlots, &id));
      table[static_cast<size_t>(q)] = id;
      if (gathers) {
        CHORUS_CHECK(b.connect(key(kGatherChannel, q), true, slot, kSlots, &id));
        table[static_cast<size_t>(n + q)] = id;
      }
    }
    if (gathers && theirs.count > 0) {  // q's result
      Segment s = b.segment(t, SegmentKind::WireGather);
      CHORUS_CHECK(b.connect(key(kGatherChannel, q), false, slot, kSlots, &s.conn[0]));
      s.begin = theirs.dstBegin;
      s.count = theirs.count;
      s.roundElems = g.pieceElems;
      s.pos = q;
      s.nranks = n;
      wireplan::lane(b, kGatherChannel, q, false, slot).segments.push_back(s);
    }
  }
  const WireShard mine = wireShard(t, n, me);
  if (mine.count == 0) return ncclSuccess;
  Segment s = b.segment(t, SegmentKind::WireOwner);
  s.begin = mine.srcBegin;
  s.blockElems = mine.dstBegin;
  s.count = mine.count;
  s.roundElems = g.pieceElems;
  s.pos = me;
  s.nranks = n;
  const int first = me == 0 ? std::min(1, n - 1) : 0;  // the first peer, named by diagnostics
  s.conn[0] = static_cast<int16_t>(table[static_cast<size_t>(first)]);
  s.conn[1] = static_cast<int16_t>(table[static_cast<size_t>(n + first)]);
  s.ringTable = b.addTableEntries(table.data(), 3 * n);
  wireplan::lane(b, kScatterChannel, -1, false, slot).segments.push_back(s);
  return ncclSuccess;
}

}  // namespace chorus
