// The sections of the chorus-topo report, each printed to a FILE*.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "core/coll_types.h"
#include "core/comm_config.h"
#include "graph/comm_graph.h"
#include "topo/comm_topology.h"

namespace chorus::tools {

struct TableOptions {
  std::vector<CollType> colls{CollType::AllReduce};
  size_t minBytes = 64;
  size_t maxBytes = size_t(1) << 30;
  size_t stepFactor = 4;
};

void printTopology(FILE* out, const topo::CommTopology& t, const std::string& source);
void printGraph(FILE* out, const topo::CommTopology& t, const graph::CommGraph& g, int maxRingLines);
void printTuner(FILE* out, const graph::CommGraph& g, const CommConfig& cfg, const TableOptions& opts);

}  // namespace chorus::tools
