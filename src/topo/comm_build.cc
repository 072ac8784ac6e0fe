#include "topo/comm_build.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/params.h"
#include "core/result.h"
#include "topo/comm_topology.h"
#include "topo/discover.h"
#include "topo/xml_read.h"
#include "topo/xml_write.h"
#include "transport/connection_table.h"

namespace chorus::topo {

ncclResult_t localTopoRecord(TopoRankRecord* out) {
  std::shared_ptr<const LocalTopology> local;
  CHORUS_CHECK(localTopology(&local));
  int cpu = callerCpuNode(local->topo);
  out->numa = cpu >= 0 ? local->topo.nodes[cpu].numa : -1;
  out->xmlBytes = static_cast<uint32_t>(local->xml.size());
  return ncclSuccess;
}

namespace {

int placeRank(const Topology& t, const RankInput& in, int rank) {
  if (!in.hostMode) {
    int gpu = t.findGpu(in.cudaDev);
    if (gpu >= 0) return gpu;
    CHORUS_INFO(kLogGraph, "rank %d: CUDA device %d is not in the topology; placing it on its CPU node", rank,
                in.cudaDev);
  }
  std::vector<int> cpus = t.nodesOfType(NodeType::Cpu);
  for (int c : cpus)
    if (t.nodes[c].numa == in.numa) return c;
  return cpus.empty() ? -1 : cpus.front();
}

double fastestNic(const Topology& t) {
  double best = 0;
  for (int n : t.nodesOfType(NodeType::Nic)) best = std::max(best, t.nodes[n].speedGBs);
  return best;
}

ncclResult_t parsePositive(const std::string& text, const char* env, double* out) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0)
    return fail(ncclInvalidUsage, "%s=\"%s\" is not a positive number", env, text.c_str());
  *out = v;
  return ncclSuccess;
}

std::string expandHost(std::string path) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  for (size_t at = path.find("%h"); at != std::string::npos; at = path.find("%h", at + 1)) path.replace(at, 2, host);
  return path;
}

}  // namespace

CommTopology assembleCommTopology(const std::vector<RankInput>& ranks, std::vector<Topology> hosts) {
  CommTopology ct;
  std::map<uint64_t, int> hostIndex;
  for (const RankInput& r : ranks) {
    if (hostIndex.count(r.hostHash) != 0) continue;
    hostIndex[r.hostHash] = static_cast<int>(ct.hostHashes.size());
    ct.hostHashes.push_back(r.hostHash);
  }
  hosts.resize(ct.hostHashes.size());
  ct.hosts = std::move(hosts);
  for (Topology& t : ct.hosts) {
    for (Node& n : t.nodes) n.rank = -1;
    if (t.paths.size() != t.nodes.size()) t.computePaths();
  }
  std::vector<int> perHost(ct.hosts.size(), 0);
  ct.ranks.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankPlace& p = ct.ranks[r];
    p.host = hostIndex[ranks[r].hostHash];
    p.localRank = perHost[p.host]++;
    Topology& t = ct.hosts[p.host];
    p.device = placeRank(t, ranks[r], static_cast<int>(r));
    if (p.device >= 0 && t.nodes[p.device].rank < 0) t.nodes[p.device].rank = static_cast<int>(r);
  }
  double slowest = 0;
  for (const Topology& t : ct.hosts) {
    double f = fastestNic(t);
    if (f > 0) slowest = slowest == 0 ? f : std::min(slowest, f);
  }
  if (slowest > 0) ct.netBwGBs = slowest;
  return ct;
}

ncclResult_t applyNetOverrides(CommTopology* ct) {
  std::string bwText = params::netBwGBs(), latText = params::netLatencyUs();
  if (!bwText.empty()) CHORUS_CHECK(parsePositive(bwText, "CHORUS_NET_BW_GBS", &ct->netBwGBs));
  if (!latText.empty()) CHORUS_CHECK(parsePositive(latText, "CHORUS_NET_LATENCY_US", &ct->netLatencyUs));
  return ncclSuccess;
}

namespace {

// Fills hosts[h] for every host but ours from the XML its first rank broadcasts.
ncclResult_t exchangeHostTopologies(ncclComm* comm, const std::vector<TopoRankRecord>& records,
                                    const std::vector<int>& leaders, int myHost, const LocalTopology& local,
                                    std::vector<Topology>* hosts, const WaitBound& bound) {
  for (size_t h = 0; h < leaders.size(); ++h) {
    int leader = leaders[h];
    std::string xml(records[leader].xmlBytes, '\0');
    if (leader == comm->id.rank) xml = local.xml;
    if (xml.size() != records[leader].xmlBytes)
      return fail(ncclInternalError, "topology of rank %d changed size during init", leader);
    CHORUS_CHECK(comm->bootstrap->broadcast(xml.data(), xml.size(), leader, bound));
    if (static_cast<int>(h) == myHost) continue;
    std::string source = "topology of rank " + std::to_string(leader) + "'s host";
    CHORUS_CHECK(parseTopologyXml(xml, source, &(*hosts)[h]));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t buildCommTopology(ncclComm* comm, const std::vector<TopoRankRecord>& records, const WaitBound& bound) {
  std::shared_ptr<const LocalTopology> local;
  CHORUS_CHECK(localTopology(&local));
  const std::vector<PeerInfo>& peers = comm->conns->peers();
  std::vector<RankInput> inputs(peers.size());
  std::vector<int> leaders;  // first rank of each host, in host order
  std::map<uint64_t, int> hostOf;
  for (size_t r = 0; r < peers.size(); ++r) {
    inputs[r] = RankInput{peers[r].hostHash, peers[r].cudaDev, records[r].numa, peers[r].hostMode != 0};
    if (hostOf.emplace(peers[r].hostHash, static_cast<int>(leaders.size())).second)
      leaders.push_back(static_cast<int>(r));
  }
  int myHost = hostOf[peers[comm->id.rank].hostHash];
  std::vector<Topology> hosts(leaders.size());
  if (leaders.size() > 1) CHORUS_CHECK(exchangeHostTopologies(comm, records, leaders, myHost, *local, &hosts, bound));
  hosts[myHost] = local->topo;
  auto ct = std::make_shared<CommTopology>(assembleCommTopology(inputs, std::move(hosts)));
  CHORUS_CHECK(applyNetOverrides(ct.get()));
  std::string dump = params::topoDumpFile();
  if (!dump.empty() && comm->id.localRank == 0) CHORUS_CHECK(dumpTopologyXml(ct->hosts[myHost], expandHost(dump)));
  CHORUS_INFO(kLogGraph, "comm %p rank %d: topology of %d host(s) (%s here), net %.2f GB/s %.1f us", (void*)comm,
              comm->id.rank, ct->nhosts(), local->source.c_str(), ct->netBwGBs, ct->netLatencyUs);
  comm->topology = std::move(ct);
  return ncclSuccess;
}

}  // namespace chorus::topo
