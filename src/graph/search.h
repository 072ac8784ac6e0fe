// Graph search: CommTopology -> CommGraph (rings per channel with their NICs,
// and the numbers trees, hierarchical plans and the tuner derive from them).
//
// Each distinct host shape (its Topology and where its ranks sit) is searched
// once (graph/intra_search.h); hosts of equal shape reuse the result, which
// is what keeps 1024 hosts x 8 GPUs well under a second. The channel count is
// the smallest any host shape sustains, capped by NCCL_MAX_NCHANNELS /
// NCCL_MAX_CTAS, and raised to NCCL_MIN_NCHANNELS / NCCL_MIN_CTAS by reusing
// rings (channel c >= found uses ring c mod found).
#pragma once

#include <memory>
#include <string>

#include "graph/comm_graph.h"
#include "nccl.h"
#include "topo/comm_topology.h"

namespace chorus::graph {

struct SearchOptions {
  int minChannels = 1;
  int maxChannels = 32;
  long budget = 200000;  // DFS nodes per intra-host search
};

// Fills *out. Fails (ncclInvalidArgument) only on an inconsistent
// CommTopology: a rank without a host or device, a host without ranks.
ncclResult_t searchGraph(const topo::CommTopology& topo, const SearchOptions& opts, CommGraph* out);

// Channel-count bounds from the environment (NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_CTAS).
SearchOptions searchOptionsFromEnv();

// The per-host XML dump of NCCL_GRAPH_DUMP_FILE (format: docs/topology.md),
// for the host of `rank`.
std::string graphToXml(const topo::CommTopology& topo, const CommGraph& g, int rank);

}  // namespace chorus::graph
