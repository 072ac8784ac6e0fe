#include "core/comm_graph_setup.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "core/comm.h"
#include "core/log.h"
#include "core/params.h"
#include "core/result.h"
#include "graph/search.h"
#include "graph/synthetic.h"
#include "topo/comm_topology.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

void dumpGraph(const topo::CommTopology& topo, const graph::CommGraph& g, int rank) {
  const std::string path = params::graphDumpFile();
  if (path.empty() || rank != 0) return;
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    CHORUS_WARN(kLogGraph, "NCCL_GRAPH_DUMP_FILE=%s: cannot open for writing", path.c_str());
    return;
  }
  const std::string xml = graph::graphToXml(topo, g, rank);
  fwrite(xml.data(), 1, xml.size(), f);
  fclose(f);
  CHORUS_INFO(kLogGraph, "graph written to %s", path.c_str());
}

}  // namespace

ncclResult_t setupCommGraph(ncclComm* comm) {
  topo::CommTopology fallback;
  const topo::CommTopology* known = comm->topology.get();
  // CHORUS_GRAPH_FLAT: the baseline of docs/performance.md's topology
  // experiment -- every rank treated as if on one host, in rank order.
  const bool flat = params::graphFlat() != 0;
  if (known == nullptr || known->nranks() != comm->id.nranks || flat) {
    std::vector<uint64_t> hashes;
    for (const PeerInfo& p : comm->conns->peers()) hashes.push_back(flat ? 0 : p.hostHash);
    if (flat) CHORUS_INFO(kLogGraph, "CHORUS_GRAPH_FLAT=1: topology ignored, one flat host in rank order");
    fallback = graph::hostsFromHashes(hashes);
    known = &fallback;
  }
  const topo::CommTopology& topo = *known;
  auto g = std::make_shared<graph::CommGraph>();
  ncclResult_t res = graph::searchGraph(topo, graph::searchOptionsFromEnv(), g.get());
  if (res != ncclSuccess) return fail(res, "rank %d: graph search failed: %s", comm->id.rank, lastErrorMessage());
  dumpGraph(topo, *g, comm->id.rank);
  comm->graph = std::move(g);
  return ncclSuccess;
}

}  // namespace chorus
