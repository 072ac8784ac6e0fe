// Helpers shared by the graph tests: run the search, check the invariants
// every CommGraph must satisfy, classify ring hops.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/comm_graph.h"
#include "graph/search.h"
#include "graph/synthetic.h"
#include "topo/comm_topology.h"

namespace chorus::graph::test {

CommGraph searchOk(const topo::CommTopology& t, SearchOptions opts = {});

topo::CommTopology synthetic(SyntheticShape shape, int hosts, int perHost, int nvlinks = -1, bool rr = false);

// Every ring is a permutation with a matching inverse, and each host's ranks
// form one contiguous segment starting at hostStart (the ring enters and
// leaves every host exactly once), hosts in index order.
void expectValidRings(const topo::CommTopology& t, const CommGraph& g);

// Path classes of the intra-host hops of channel `c`'s ring on host `h`,
// including the hop that closes the host's cycle when the ring stays on one host.
std::vector<topo::PathType> intraHops(const topo::CommTopology& t, const CommGraph& g, int c, int h);

// Path to a shipped machine file; empty when it is not there.
std::string shippedFile(const char* name);

}  // namespace chorus::graph::test
