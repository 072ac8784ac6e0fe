// The tuner: for each collective, pick algorithm x protocol x channel count
// from a cost model, honouring NCCL_ALGO / NCCL_PROTO / channel bounds.
//
// Model (host mode). A pipelined schedule of `hops` sequential transfers
// that moves a chunk of `c` bytes per hop, cut into k pieces of size p,
// finishes in about (hops + k - 1) * (alpha + p / beta): the first piece pays
// every hop's latency, the rest stream behind it. Ring all-reduce has
// 2(n-1) hops of S/n bytes; the double binary tree has 2*depth hops of S/2
// bytes per tree, with both trees running at once. Protocols differ in piece
// size (Simple: big slots, LL: small slots) and per-piece overhead.
#pragma once

#include <cstddef>
#include <string>

#include "core/comm_config.h"
#include "enqueue/task.h"

namespace chorus {

enum class Algo : uint8_t { Ring = 0, Tree = 1, Direct = 2 };
enum class Proto : uint8_t { Simple = 0, LL = 1 };

const char* algoName(Algo a);
const char* protoName(Proto p);

struct CostParams {
  double alphaUs = 0.4;         // per hop, per piece fixed cost (wake-up, counters)
  double llAlphaUs = 0.3;       // LL's smaller per-piece cost
  double betaGBs = 6.0;         // per-link copy bandwidth
  double llBetaFactor = 0.8;    // LL pieces use the memory system less efficiently
  double launchUs = 0.3;        // per-call fixed overhead
};

struct TuneDecision {
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  int nchannels = 1;
  double estimatedUs = 0;
};

// Parses NCCL_ALGO / NCCL_PROTO style lists ("Ring,Tree", "^Tree", "allreduce:tree")
// for the given collective; returns a bitmask of allowed values (bit = enum value).
unsigned allowedAlgos(const std::string& spec, CollType coll);
unsigned allowedProtos(const std::string& spec);

ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, TuneDecision* out);
double estimateUs(Algo algo, Proto proto, CollType coll, size_t bytes, int nranks, const CommConfig& cfg,
                  const CostParams& cost = CostParams{});

}  // namespace chorus
