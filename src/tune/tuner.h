// The tuner: for each collective, pick algorithm x protocol x channel count
// with the cost model (tune/cost_model.h), honouring NCCL_ALGO, NCCL_PROTO
// and the channel bounds (NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_CTAS,
// ncclConfig_t minCTAs/maxCTAs, all folded into CommConfig at init).
//
// Every decision can be explained: with NCCL_DEBUG=INFO and
// NCCL_DEBUG_SUBSYS=TUNING each one is logged as a single line
//   TUNING {"coll":..,"bytes":..,"nranks":..,"nhosts":..,"candidates":[..],"winner":{..},"forced":..}
// (pure JSON after the "TUNING " prefix; candidates hold the best channel
// count of every allowed algorithm x protocol pair).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/comm_config.h"
#include "enqueue/task.h"
#include "graph/comm_graph.h"
#include "tune/cost_model.h"

namespace chorus {

struct TuneDecision {
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  int nchannels = 1;
  double estimatedUs = 0;
};

struct TuneCandidate {
  Algo algo;
  Proto proto;
  int nchannels;
  double us;
};

struct TuneResult {
  TuneDecision winner;
  std::vector<TuneCandidate> candidates;  // best channel count per allowed algorithm x protocol
  std::string forced;                     // knobs that narrowed the choice ("NCCL_ALGO", ...), empty if none
};

// Parses NCCL_ALGO / NCCL_PROTO style lists ("Ring,Tree", "^Tree", "allreduce:tree;allgather:ring")
// for the given collective; returns a bitmask of allowed values (bit = enum value).
unsigned allowedAlgos(const std::string& spec, CollType coll);
unsigned allowedProtos(const std::string& spec);

// The full evaluation behind a decision (chorus-topo prints it as a table).
TuneResult tuneCollective(CollType coll, size_t bytes, const MachineModel& model, const CommConfig& cfg);
std::string tuningJson(CollType coll, size_t bytes, const MachineModel& model, const TuneResult& r);

// Decision for one task; `graph` may be null (one host, rank order).
ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, const graph::CommGraph* graph,
                      TuneDecision* out);

}  // namespace chorus
