// The text the tools print, laid out like nccl-tests' output so that
// scripts that parse one parse the other.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/context.h"

namespace chorus_bench {

// One half (out-of-place or in-place) of a table row, already agreed on by
// all ranks.
struct Measurement {
  double timeUs = 0;
  double algBw = 0;      // GB/s
  double busBw = 0;      // GB/s
  double wrong = 0;      // elements, summed over ranks; < 0: not checked
  double wireBytes = 0;  // bytes sent per operation, mean over ranks (chorusCommGetStats)
  double netBytes = 0;   // of them over the network (chorusLinkNet)
};

// "# nThread ... " and the per-rank lines (rankLines: one per rank).
void printPreamble(const Job& job, const std::vector<std::string>& rankLines);
void printTableHeader();
void printRow(size_t bytes, size_t count, const RowConfig& row, const CollSpec& spec, const Measurement& oop,
              const Measurement& inplace);
// "#  bytes on the wire ...": the row's wireBytes (and, where some crossed
// the network, netBytes), also as multiples of its size.
void printWireBytes(size_t bytes, const Measurement& oop, const Measurement& inplace);
void printSummary(double wrongTotal, double avgBusBw);

}  // namespace chorus_bench
