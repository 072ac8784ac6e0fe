// Measuring one half (out-of-place or in-place) of one table row on the
// ranks of one thread.
#pragma once

#include <vector>

#include "common/context.h"

namespace chorus_bench {

// One launch of the collective on every rank of the thread (times `agg`),
// grouped when there is more than one, and waited for unless !wait (GPU
// mode: the work is then only enqueued on the ranks' streams; host mode
// calls return complete either way).
void launchAll(ThreadRanks& t, const RowConfig& row, bool inPlace, int agg, bool wait = true);

// Microseconds per operation over opts.iters timed iterations. GPU mode
// enqueues them all and stops the clock once every stream has drained; with
// -G N they are captured into one CUDA graph per rank, replayed N times.
double timeRow(ThreadRanks& t, const RowConfig& row, bool inPlace);

// Runs opts.checkIters checked launches (fresh inputs, poisoned outputs
// each time) and returns the wrong elements found on each rank of the thread.
std::vector<double> checkRow(ThreadRanks& t, const RowConfig& row, bool inPlace);

// Fills every rank's buffers with valid inputs of the configuration, so
// that timed runs reduce ordinary numbers.
void fillForTiming(ThreadRanks& t, ncclDataType_t type, BenchOp op);

}  // namespace chorus_bench
