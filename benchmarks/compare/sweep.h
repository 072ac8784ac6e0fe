// Shared by the peer-comparison tools (OpenMPI and Gloo all-reduce): the
// size sweep, the few options they take, and output in the same columns as
// all_reduce_perf so that run_compare.sh reads every tool the same way.
// Header-only: these tools link neither Chorus nor each other.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace compare {

struct SweepOptions {
  size_t minBytes = 8;
  size_t maxBytes = size_t{256} << 20;
  double factor = 2.0;
  int iters = 20;
  int warmup = 5;
  int check = 1;
};

inline bool parseBytes(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v) << shift;
  return true;
}

// -b -e -f -n -w -c with the meanings of the Chorus tools. False on error.
inline bool parseSweep(int argc, char** argv, SweepOptions* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    bool ok = true;
    if (flag == "-b")
      ok = parseBytes(v, &o->minBytes);
    else if (flag == "-e")
      ok = parseBytes(v, &o->maxBytes);
    else if (flag == "-f")
      o->factor = std::atof(v);
    else if (flag == "-n")
      o->iters = std::atoi(v);
    else if (flag == "-w")
      o->warmup = std::atoi(v);
    else if (flag == "-c")
      o->check = std::atoi(v);
    else
      ok = false;
    if (!ok) return false;
  }
  return o->factor > 1.0 && o->iters > 0 && o->warmup >= 0 && o->minBytes <= o->maxBytes;
}

inline std::vector<size_t> sweepSizes(const SweepOptions& o) {
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes;) {
    sizes.push_back(s);
    const auto next = static_cast<size_t>(static_cast<double>(s) * o.factor);
    s = next > s ? next : s + 1;
  }
  return sizes;
}

inline void printHeader(const char* what, int nranks, const SweepOptions& o) {
  std::printf("# %s, %d ranks, %d iters, %d warmup, check %d\n#\n", what, nranks, o.iters, o.warmup, o.check);
  std::printf("#%74s%31s\n", "out-of-place", "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

// All-reduce bus bandwidth: 2(n-1)/n of the algorithm bandwidth.
inline double busBw(size_t bytes, double us, int nranks) {
  if (us <= 0) return 0;
  return static_cast<double>(bytes) / 1e3 / us * 2.0 * (nranks - 1) / nranks;
}

inline void printHalf(size_t bytes, double us, int nranks, long wrong, bool checked) {
  const double alg = us > 0 ? static_cast<double>(bytes) / 1e3 / us : 0;
  char time[32];
  std::snprintf(time, sizeof time, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  char w[32];
  if (checked)
    std::snprintf(w, sizeof w, "%6ld", wrong);
  else
    std::snprintf(w, sizeof w, "%6s", "N/A");
  std::printf("  %7s  %6.2f  %6.2f %6s", time, alg, busBw(bytes, us, nranks), w);
}

inline void printRowStart(size_t bytes, size_t count) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, "float", "sum", -1);
}

inline void printSummary(long wrong, double avgBusBw) {
  std::printf("# Out of bounds values : %ld %s\n", wrong, wrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", avgBusBw);
  std::fflush(stdout);
}

// Inputs whose float sum is exact in any order: small integers.
inline float inputValue(int rank, size_t i) { return static_cast<float>((rank * 3 + i * 5) % 11); }

inline float expectedSum(int nranks, size_t i) {
  float s = 0;
  for (int r = 0; r < nranks; ++r) s += inputValue(r, i);
  return s;
}

}  // namespace compare
