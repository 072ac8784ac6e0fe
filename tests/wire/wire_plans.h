// What the plan tests of the direct reductions share: graphs that claim
// ranks sit on several hosts, and a float sum AllReduce task to plan.
#pragma once

#include <cstddef>
#include <memory>

#include "enqueue/task.h"
#include "graph/comm_graph.h"

namespace chorus::test {

// A graph, identical on every rank, claiming rank r sits on host r % hosts
// (`roundRobin`, as `--map-by node` deals them) or on host r / (nranks /
// hosts) (as `--map-by slot` does).
std::shared_ptr<const graph::CommGraph> hostsGraph(int nranks, int hosts, bool roundRobin);

// A float sum AllReduce of `count` elements (at most 1 << 16) between
// buffers that live as long as the process; set its wire spec before planning.
Task floatSumTask(size_t count);

}  // namespace chorus::test
