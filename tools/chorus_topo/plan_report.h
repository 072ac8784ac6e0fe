// chorus-topo --plan: the plan one rank would run for one collective, built
// by the library's own plan builder against a dry connector source.
#pragma once

#include <cstddef>
#include <cstdio>

#include "core/comm_config.h"
#include "enqueue/task.h"
#include "graph/comm_graph.h"

namespace chorus::tools {

struct PlanOptions {
  bool enabled = false;
  CollType coll = CollType::AllReduce;
  size_t bytes = 0;  // the nccl-tests "size" of the operation
  int rank = 0;
};

// Prints lanes, segments, connectors, protocol, the plan's size in bytes and
// the time its build takes. Returns 0, or 1 after an error message.
int printPlan(FILE* out, const graph::CommGraph& g, const CommConfig& cfg, const PlanOptions& o);

}  // namespace chorus::tools
