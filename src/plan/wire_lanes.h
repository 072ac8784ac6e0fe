// What the direct reductions' expanders (plan_wire.cc, plan_wire_hosts.cc)
// share: the connectors' channel ids, slot sizes, keys and lanes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/links.h"
#include "plan/plan_builder.h"
#include "plan/wire_geometry.h"

namespace chorus::wireplan {

// Connector channels of the Direct class, apart from every other
// algorithm's: contributions to an owner (or, across hosts, a host's sum),
// results to gatherers (or, across hosts, to the relaying rank), and across
// hosts the fp32 partials and the results inside a host, one channel per
// host of the shard's owner (so a pair of ranks has one connector per shard).
inline constexpr uint16_t kScatterChannel = 64, kGatherChannel = 65;
// Deterministic mode's chain across hosts (plan_wire_chain.cc): four
// channels per share of a shard from here on (values to the link, partials
// from link to link, the result between hosts and inside a host).
inline constexpr uint16_t kChainBaseChannel = 66;
// Deterministic ReduceScatter and Reduce across hosts (plan_wire_chain_rs.cc):
// values to a host's link, partials from link to link, the last partial to
// the shard's owner.
inline constexpr uint16_t kChainValueChannel = 48, kChainPartialChannel = 49, kChainFinishChannel = 50;
inline constexpr uint16_t kPartialBase = 4096, kLocalGatherBase = 8192;
inline constexpr int kMaxHosts = 4096;
inline constexpr uint32_t kSlots = 4;

// Slot size of the wire connectors: the Simple slot, shrunk beyond 8 ranks
// so the n^2 FIFOs of an all-to-all stay small (each rank holds 2(n-1)).
inline uint32_t slotBytes(const PlanBuilder& b) {
  uint32_t bytes = b.slotBytes(ConnClass::Direct, Proto::Simple);
  if (b.nranks() > 8) bytes = bytes / static_cast<uint32_t>((b.nranks() + 7) / 8);
  return std::max<uint32_t>(bytes, kMinWireSlotBytes);
}

inline ConnKey key(int channel, int peer) {
  return ConnKey{ConnClass::Direct, static_cast<uint8_t>(Proto::Simple), static_cast<uint16_t>(channel), peer};
}

// An owner's (or combiner's) rank table of 3n entries (segment.h): no
// inputs, no outputs, no fp32 partials yet.
inline std::vector<int32_t> ownerTable(int n) {
  std::vector<int32_t> table(3 * static_cast<size_t>(n), sched::kNoConn);
  std::fill(table.begin() + 2 * static_cast<std::ptrdiff_t>(n), table.end(), 0);
  return table;
}

// Whether the graph lets a direct reduction take a form across hosts
// (two-level, chain): CHORUS_WIRE_HOSTS on, hosts of the same number G > 1
// of ranks, more than one host, and the graph describing this communicator.
inline bool acrossHostsForm(const PlanBuilder& b) {
  const graph::CommGraph* g = b.graph();
  return b.config().wireHosts && g != nullptr && graph::hierSupported(*g) && g->nranks == b.nranks() &&
         g->ranksPerHost > 1 && g->nhosts > 1;
}

// What both deterministic chains across hosts (plan_wire_chain.cc,
// plan_wire_chain_rs.cc) build with: the builder and the task, ranks, this
// rank, G ranks on each of H hosts holding consecutive ranks, the slot, and
// whole blocks per piece such that the widest payload (a partial in the
// compute type, or a value with PreMulSum's product) fills a slot.
struct ChainCtx {
  PlanBuilder& b;
  const Task& t;
  int n, me, G, H;
  uint32_t slot;
  uint64_t pieceElems;
  int host(int r) const { return r / G; }
  int pos(int r) const { return r % G; }
  int at(int h, int p) const { return h * G + p; }

  // Connects a combination's input from `peer` on `channel` into its rank
  // table (ownerTable; partial: in the compute type); the first input is
  // also the segment's conn[0], which diagnostics name.
  ncclResult_t input(sched::Segment& s, std::vector<int32_t>& table, int peer, int channel, bool partial) const {
    int16_t id = sched::kNoConn;
    if (const ncclResult_t res = b.connect(key(channel, peer), false, slot, kSlots, &id); res != ncclSuccess)
      return res;
    table[static_cast<size_t>(peer)] = id;
    table[2 * static_cast<size_t>(n) + static_cast<size_t>(peer)] = partial ? 1 : 0;
    if (s.conn[0] == sched::kNoConn) s.conn[0] = id;
    return ncclSuccess;
  }
  // Connects the table entry n + peer that sends the segment's output to
  // `peer` on `channel`; the first output is also its conn[1].
  ncclResult_t output(sched::Segment& s, std::vector<int32_t>& table, int peer, int channel) const {
    int16_t id = sched::kNoConn;
    if (const ncclResult_t res = b.connect(key(channel, peer), true, slot, kSlots, &id); res != ncclSuccess) return res;
    table[static_cast<size_t>(n) + static_cast<size_t>(peer)] = id;
    if (s.conn[1] == sched::kNoConn) s.conn[1] = id;
    return ncclSuccess;
  }
};

inline ChainCtx chainCtx(PlanBuilder& b, const Task& t) {
  const graph::CommGraph& g = *b.graph();
  const uint32_t slot = slotBytes(b);
  const uint32_t widest = std::max(wireScatterElemBytes(t), wireComputeBytes(t));
  return ChainCtx{b,
                  t,
                  b.nranks(),
                  b.rank(),
                  g.ranksPerHost,
                  g.nhosts,
                  slot,
                  wire::pieceElemsFor(wire::Format::Native, widest, slot)};
}

// The lane of one segment (each wire segment has its own, so they progress
// independently).
inline Lane& lane(PlanBuilder& b, int channel, int peer, bool sendSide, uint32_t slot) {
  Lane& l = b.lane(ConnClass::Direct, Proto::Simple, channel, peer, sendSide);
  l.pieceBytes = slot;
  return l;
}

}  // namespace chorus::wireplan
