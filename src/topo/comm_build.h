// Building a communicator's CommTopology at init.
//
// Every rank contributes a small fixed TopoRankRecord to the PeerInfo
// all-gather that communicator init already does, so a communicator whose
// ranks all share one host costs no extra bootstrap round: each rank uses its
// process's cached local Topology. Across hosts, the first rank of each host
// broadcasts its topology as XML (one broadcast per host, sizes known from the
// records) and every rank parses the other hosts' files.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nccl.h"
#include "topo/comm_topology.h"

struct ncclComm;

namespace chorus {
struct WaitBound;
}

namespace chorus::topo {

struct TopoRankRecord {
  int32_t numa = -1;      // NUMA id of the CPU node the rank runs on
  uint32_t xmlBytes = 0;  // size of its host's topology XML
};

// What this rank contributes (also warms the process's topology cache).
ncclResult_t localTopoRecord(TopoRankRecord* out);

// Input to assembleCommTopology: one entry per rank.
struct RankInput {
  uint64_t hostHash = 0;
  int cudaDev = -1;
  int numa = -1;
  bool hostMode = true;
};

// Pure part: `hosts` holds the Topology of each distinct hostHash in order of
// first appearance in `ranks`. Places every rank (its GPU by cudaDev; in host
// mode, or when the GPU is missing, the CPU node of its NUMA id), marks
// Node::rank, and sets netBwGBs from the NICs (the slowest host's fastest NIC).
CommTopology assembleCommTopology(const std::vector<RankInput>& ranks, std::vector<Topology> hosts);

// Applies CHORUS_NET_BW_GBS / CHORUS_NET_LATENCY_US; a malformed value is ncclInvalidUsage.
ncclResult_t applyNetOverrides(CommTopology* ct);

// Runs at communicator init after the PeerInfo exchange (records: every rank's
// TopoRankRecord, rank order); stores comm->topology and honours NCCL_TOPO_DUMP_FILE.
ncclResult_t buildCommTopology(ncclComm* comm, const std::vector<TopoRankRecord>& records, const WaitBound& bound);

}  // namespace chorus::topo
