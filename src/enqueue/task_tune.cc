#include "enqueue/task_tune.h"

#include "core/comm_query.h"

namespace chorus {

TuneKnobs tuneKnobs(const CommConfig& cfg) {
  TuneKnobs k;
  k.algo = cfg.algo;
  k.proto = cfg.proto;
  k.minChannels = cfg.minChannels;
  k.maxChannels = cfg.maxChannels;
  return k;
}

ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, const graph::CommGraph* graph,
                      TuneDecision* out) {
  TuneInputs in;
  in.nranks = nranks;
  in.hostMode = task.comm == nullptr || commIsHostMode(task.comm);
  in.graph = graph;
  in.knobs = tuneKnobs(cfg);
  *out = tuneCollective(task.type, taskBytes(task, nranks), in);
  return ncclSuccess;
}

}  // namespace chorus
