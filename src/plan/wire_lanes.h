// What the direct reductions' expanders (plan_wire.cc, plan_wire_hosts.cc)
// share: the connectors' channel ids, slot sizes, keys and lanes.
#pragma once

#include <algorithm>
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
inline constexpr uint16_t kPartialBase = 4096, kLocalGatherBase = 8192;
inline constexpr int kMaxHosts = 4096;
inline constexpr uint32_t kSlots = 4;

// Slot size of the wire connectors: the Simple slot, shrunk beyond 8 ranks
// so the n^2 FIFOs of an all-to-all stay small (each rank holds 2(n-1)).
inline uint32_t slotBytes(const PlanBuilder& b) {
  uint32_t bytes = b.slotBytes(Proto::Simple);
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
  std::fill(table.begin() + 2 * n, table.end(), 0);
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

// The lane of one segment (each wire segment has its own, so they progress
// independently).
inline Lane& lane(PlanBuilder& b, int channel, int peer, bool sendSide, uint32_t slot) {
  Lane& l = b.lane(ConnClass::Direct, Proto::Simple, channel, peer, sendSide);
  l.pieceBytes = slot;
  return l;
}

}  // namespace chorus::wireplan
