#include "common/report.h"

#include <cstdio>

namespace chorus_bench {
namespace {

// Times keep seven columns: fewer decimals as they grow.
void formatTime(double us, char* out, size_t n) {
  if (us >= 10000.0)
    std::snprintf(out, n, "%7.0f", us);
  else if (us >= 100.0)
    std::snprintf(out, n, "%7.1f", us);
  else
    std::snprintf(out, n, "%7.2f", us);
}

void formatHalf(const Measurement& m, char* out, size_t n) {
  char time[32];
  formatTime(m.timeUs, time, sizeof time);
  char wrong[32];
  if (m.wrong < 0)
    std::snprintf(wrong, sizeof wrong, "%6s", "N/A");
  else
    std::snprintf(wrong, sizeof wrong, "%6.0f", m.wrong);
  std::snprintf(out, n, "  %7s  %6.2f  %6.2f %6s", time, m.algBw, m.busBw, wrong);
}

}  // namespace

void printPreamble(const Job& job, const std::vector<std::string>& rankLines) {
  const Options& o = job.opts;
  int version = 0;
  ncclGetVersion(&version);
  std::printf("# %s (Chorus, NCCL API %d)\n", job.spec->name, version);
  if (o.stepFactor > 1.0)
    std::printf(
        "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d "
        "agg iters: %d validation: %d graph: %d\n",
        o.nThreads, o.ranksPerThread, o.minBytes, o.maxBytes, o.stepFactor, o.warmupIters, o.iters, o.aggIters,
        o.checkIters, o.graphLaunches);
  else
    std::printf(
        "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(bytes) warmup iters: %d iters: %d "
        "agg iters: %d validation: %d graph: %d\n",
        o.nThreads, o.ranksPerThread, o.minBytes, o.maxBytes, o.stepBytes, o.warmupIters, o.iters, o.aggIters,
        o.checkIters, o.graphLaunches);
  std::printf("#\n# Launch: %s, %d process(es), %d rank(s) in total, %s communicators%s\n", job.world.how,
              job.world.size, job.nranks, o.blockingInit ? "blocking" : "non-blocking",
              o.registerBuffers ? ", registered buffers (-R 1)" : "");
  if (o.reduceConfigured()) {
    static const char* const kWireNames[] = {"native", "bf16", "fp8", "int8"};
    std::printf("# Reduce configuration: --wire %s --deterministic %d (chorus*Ex calls)\n",
                kWireNames[static_cast<int>(o.wire)], o.deterministic ? 1 : 0);
  }
  std::printf("# Using devices\n");
  for (const std::string& line : rankLines) std::printf("%s\n", line.c_str());
  std::printf("#\n");
}

void printTableHeader() {
  std::printf("#%74s%31s\n", "out-of-place", "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void printRow(size_t bytes, size_t count, const RowConfig& row, const CollSpec& spec, const Measurement& oop,
              const Measurement& inplace) {
  char a[96];
  char b[96];
  formatHalf(oop, a, sizeof a);
  formatHalf(inplace, b, sizeof b);
  std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", bytes, count, typeInfo(row.type).name,
              spec.reduces ? opName(row.op) : "none", spec.rooted ? row.root : -1, a, b);
  std::fflush(stdout);
}

void printWireBytes(size_t bytes, const Measurement& oop, const Measurement& inplace) {
  const double size = bytes > 0 ? static_cast<double>(bytes) : 1.0;
  std::printf("#  bytes on the wire per op and rank: out-of-place %.0f (%.4f x size)  in-place %.0f (%.4f x size)",
              oop.wireBytes, oop.wireBytes / size, inplace.wireBytes, inplace.wireBytes / size);
  if (oop.netBytes > 0 || inplace.netBytes > 0)
    std::printf("  network: out-of-place %.0f (%.4f x size)  in-place %.0f (%.4f x size)", oop.netBytes,
                oop.netBytes / size, inplace.netBytes, inplace.netBytes / size);
  std::printf("\n");
  std::fflush(stdout);
}

void printSummary(double wrongTotal, double avgBusBw) {
  std::printf("# Out of bounds values : %.0f %s\n", wrongTotal, wrongTotal > 0 ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n", avgBusBw);
  std::printf("#\n");
  std::fflush(stdout);
}

}  // namespace chorus_bench
