#include "enqueue/task_tune.h"

#include <map>

#include "core/comm.h"
#include "core/comm_query.h"
#include "core/params.h"
#include "transport/connection_table.h"

namespace chorus {

TuneKnobs tuneKnobs(const CommConfig& cfg) {
  TuneKnobs k;
  k.algo = cfg.algo;
  k.proto = cfg.proto;
  k.minChannels = cfg.minChannels;
  k.maxChannels = cfg.maxChannels;
  return k;
}

bool peersBehindProxy(const std::vector<PeerInfo>& peers, bool shmOff) {
  std::map<uint64_t, uint64_t> processOfHost;
  for (const PeerInfo& p : peers) {
    auto [it, fresh] = processOfHost.emplace(p.hostHash, p.processToken);
    if (!fresh && shmOff && it->second != p.processToken) return true;
  }
  return processOfHost.size() > 1;
}

namespace {

bool proxiedPeers(const ncclComm* comm) {
  if (comm == nullptr || commIsHostMode(comm) || !comm->conns) return false;
  return peersBehindProxy(comm->conns->peers(), params::shmDisable() != 0);
}

}  // namespace

ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, const graph::CommGraph* graph,
                      TuneDecision* out) {
  TuneInputs in;
  in.nranks = nranks;
  in.hostMode = task.comm == nullptr || commIsHostMode(task.comm);
  in.graph = graph;
  in.knobs = tuneKnobs(cfg);
  in.proxiedPeers = proxiedPeers(task.comm);
  *out = tuneCollective(task.type, taskBytes(task, nranks), in);
  return ncclSuccess;
}

}  // namespace chorus
