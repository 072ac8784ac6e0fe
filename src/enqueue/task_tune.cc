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

namespace {

// Whether, in GPU mode, ranks of one host may connect through the network
// transport: shm is off and some host holds ranks of several processes
// (the P2P transport may still take some pairs; LL is given up for all, the
// same way on every rank, since all see the same peers and knobs).
bool proxiedWithinHost(const ncclComm* comm) {
  if (comm == nullptr || commIsHostMode(comm) || !comm->conns || params::shmDisable() == 0) return false;
  std::map<uint64_t, uint64_t> processOfHost;
  for (const PeerInfo& p : comm->conns->peers()) {
    auto [it, fresh] = processOfHost.emplace(p.hostHash, p.processToken);
    if (!fresh && it->second != p.processToken) return true;
  }
  return false;
}

}  // namespace

ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, const graph::CommGraph* graph,
                      TuneDecision* out) {
  TuneInputs in;
  in.nranks = nranks;
  in.hostMode = task.comm == nullptr || commIsHostMode(task.comm);
  in.graph = graph;
  in.knobs = tuneKnobs(cfg);
  in.proxiedWithinHost = proxiedWithinHost(task.comm);
  *out = tuneCollective(task.type, taskBytes(task, nranks), in);
  return ncclSuccess;
}

}  // namespace chorus
