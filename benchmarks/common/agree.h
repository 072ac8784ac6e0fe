// Small collectives the driver itself needs: combining per-rank numbers
// (times, error counts) and collecting the per-rank header lines. They go
// through the communicators under test, which reach every rank whether the
// ranks are threads, processes, or both, with no second transport needed.
#pragma once

#include <string>
#include <vector>

#include "common/context.h"

namespace chorus_bench {

// Most values one agree() call combines per rank.
constexpr size_t kMaxAgreeValues = 16;
// Bytes of one rank's header line; Rank::lines holds nranks of them.
constexpr size_t kRankLineBytes = 160;

// perRank[i] holds the values of the thread's i-th rank (all the same length
// n <= kMaxAgreeValues). Returns their element-wise reduction with `op`
// (ncclSum, ncclMin or ncclMax) over every rank of the job.
std::vector<double> agree(ThreadRanks& t, const std::vector<std::vector<double>>& perRank, ncclRedOp_t op);

// One descriptive line per rank of the job, in rank order (gathered in
// each rank's `lines` buffer).
std::vector<std::string> gatherRankLines(ThreadRanks& t);

}  // namespace chorus_bench
