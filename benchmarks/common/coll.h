// What a benchmark tool knows about its collective. Each tool is one file
// that fills in a CollSpec and hands it to benchMain(); everything else
// (arguments, threads, communicators, timing, checking, the table) is shared.
#pragma once

#include <cstddef>
#include <vector>

#include "chorus/chorus.h"
#include "nccl.h"

namespace chorus_bench {

// Buffer shapes for one row of the table, in elements.
struct Layout {
  size_t sendCount = 0;   // elements each rank's send buffer holds
  size_t recvCount = 0;   // elements each rank's receive buffer holds
  size_t paramCount = 0;  // the count passed to the API and printed
  // In-place runs carve both pointers out of the receive allocation:
  // send = base + rank * sendInplaceOffset, recv = base + rank * recvInplaceOffset.
  size_t sendInplaceOffset = 0;
  size_t recvInplaceOffset = 0;
};

// One stretch of a rank's receive buffer whose expected content is known:
// either a copy of rank srcRank's input starting at srcOffset, or the
// reduction over all ranks of the inputs starting at srcOffset.
struct Segment {
  size_t recvOffset;
  size_t count;
  bool reduced;
  int srcRank;
  size_t srcOffset;
};

// Everything one launch needs.
struct LaunchArgs {
  const void* send;
  void* recv;
  size_t count;  // Layout::paramCount
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;
  // --wire / --deterministic: the configuration for the chorus*Ex call; null: the plain call.
  const chorusReduceConfig_t* reduce = nullptr;
};

struct CollSpec {
  const char* name;  // e.g. "AllReduce", printed in the header
  bool reduces;      // takes a reduction operator (the redop column)
  bool rooted;       // takes a root (the root column)
  // False where an in-place run has no defined result (send and receive
  // share one buffer with no offsets: alltoall, sendrecv); its #wrong is N/A.
  bool inPlaceChecked;
  // Buffer shapes when the user asked for `count` elements in total.
  Layout (*layout)(size_t count, size_t eltSize, int nranks);
  // busbw = algbw * busFactor (see benchmarks/README.md).
  double (*busFactor)(int nranks);
  ncclResult_t (*launch)(const LaunchArgs& args);
  // The checked parts of rank `rank`'s receive buffer after one launch.
  void (*expected)(const Layout& layout, int rank, int nranks, int root, std::vector<Segment>* out);
  // launch() honours LaunchArgs::reduce (--wire, --deterministic).
  bool takesReduceConfig = false;
};

// Per-rank slice alignment: slices stay 16-byte aligned, as NCCL users
// typically arrange (a count that does not divide evenly is rounded down).
inline size_t alignedSlice(size_t count, size_t eltSize, int nranks) {
  const size_t perRank = count / static_cast<size_t>(nranks);
  const size_t unit = eltSize < 16 ? 16 / eltSize : 1;
  return perRank / unit * unit;
}

// The tool's entry point: parses argv, runs the sweep, returns the exit code.
int benchMain(int argc, char** argv, const CollSpec& spec);

}  // namespace chorus_bench
