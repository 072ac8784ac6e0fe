// The tuner: for each collective, pick algorithm x protocol x channel count
// with the cost model (tune/cost_model.h), honouring NCCL_ALGO, NCCL_PROTO
// and the channel bounds (NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_CTAS,
// ncclConfig_t minCTAs/maxCTAs, all folded into CommConfig at init and
// handed over here as TuneKnobs).
//
// It sees a collective as (type, bytes) and a communicator as TuneInputs:
// no task, no communicator, no executor. The caller that holds a Task
// (plan building, ncclGroupSimulateEnd) goes through enqueue/task_tune.h.
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

#include "core/coll_types.h"
#include "graph/comm_graph.h"
#include "tune/cost_model.h"

namespace chorus {

// The user's narrowing of the choice (NCCL_ALGO, NCCL_PROTO, channel bounds).
struct TuneKnobs {
  std::string algo;   // NCCL_ALGO syntax; empty: every algorithm
  std::string proto;  // NCCL_PROTO syntax; empty: every protocol
  int minChannels = 1;
  int maxChannels = 1;
};

// What the tuner knows of a communicator.
struct TuneInputs {
  int nranks = 1;
  bool hostMode = true;                     // the communicator's mode (commIsHostMode)
  const graph::CommGraph* graph = nullptr;  // null: one host, rank order
  TuneKnobs knobs;
  // GPU mode: some ranks may talk through the network transport, whose proxy
  // cannot forward LL (ranks on other hosts, even where the graph says one
  // host; NCCL_SHM_DISABLE with ranks of several processes on a host): such
  // communicators use Simple only.
  bool proxiedPeers = false;
};

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

// The full evaluation behind a decision on a given model (chorus-topo prints it as a table).
TuneResult tuneCollective(CollType coll, size_t bytes, const MachineModel& model, const TuneKnobs& knobs);
std::string tuningJson(CollType coll, size_t bytes, const MachineModel& model, const TuneResult& r);

// The model of a communicator: its graph's, with the constraints of its mode.
MachineModel machineModel(const TuneInputs& in);

// The decision for `bytes` of `coll` (the API's "size", see taskBytes) on a
// communicator; logs the TUNING line.
TuneDecision tuneCollective(CollType coll, size_t bytes, const TuneInputs& in);

}  // namespace chorus
