// Command-line options, with the flag letters and meanings of nccl-tests.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "chorus/chorus.h"
#include "common/datatypes.h"

namespace chorus_bench {

// How the per-rank times of one measurement become the number printed.
enum class Average { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

struct Options {
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  double stepFactor = 1.0;      // > 1: geometric sweep (-f)
  size_t stepBytes = 1u << 20;  // used when stepFactor <= 1 (-i)
  int iters = 20;
  int warmupIters = 5;
  int aggIters = 1;
  int checkIters = 1;  // 0: no results check
  int nThreads = 1;
  int ranksPerThread = 1;
  bool blockingInit = true;  // false: config.blocking = 0, poll for ncclInProgress
  Average average = Average::Mean;
  std::vector<ncclDataType_t> types{ncclFloat32};
  std::vector<BenchOp> ops{BenchOp::Sum};
  int root = 0;  // -1: every root in turn (-r all)
  // -G: capture the timed iterations into a CUDA graph and replay it this
  // many times (GPU mode; ignored, with a note, in host mode). 0: no graph.
  int graphLaunches = 0;
  // -R 1: register send and receive buffers with each communicator
  // (nccl-tests' local registration; 2, symmetric windows, is not offered).
  bool registerBuffers = false;
  // --wire / --deterministic (all_reduce_perf, reduce_scatter_perf): call
  // chorusAllReduceEx / chorusReduceScatterEx with this configuration
  // (docs/wire.md); unset, the plain NCCL call.
  chorusWire_t wire = chorusWireNative;
  bool deterministic = false;
  bool reduceConfigured() const { return wire != chorusWireNative || deterministic; }
};

// Parses argv. Returns 0 to go on, otherwise the exit code to leave with
// (0 after -h, 2 after a usage error, which has then been printed).
int parseOptions(int argc, char** argv, const char* tool, Options* opts, bool* done);

// Parses "64", "8K", "16M", "1G" (powers of 1024). False on garbage.
bool parseSize(const char* text, size_t* out);

// The byte sizes of the sweep, in order.
std::vector<size_t> sweepSizes(const Options& opts);

}  // namespace chorus_bench
