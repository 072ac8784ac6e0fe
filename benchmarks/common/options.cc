#include "common/options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace chorus_bench {
namespace {

const char kUsage[] =
    "Usage: %s [options]\n"
    "  -t, --nthreads <n>        threads per process, each driving its own ranks (1)\n"
    "  -g, --ngpus <n>           ranks (communicators) per thread, grouped (1)\n"
    "  -b, --minbytes <size>     smallest size, K/M/G suffixes allowed (32M)\n"
    "  -e, --maxbytes <size>     largest size (32M)\n"
    "  -i, --stepbytes <size>    step between sizes (1M)\n"
    "  -f, --stepfactor <x>      multiply sizes by x instead of stepping\n"
    "  -n, --iters <n>           timed iterations per size (20)\n"
    "  -w, --warmup_iters <n>    untimed iterations before the sweep (5)\n"
    "  -m, --agg_iters <n>       operations aggregated in one group per iteration (1)\n"
    "  -c, --check <n>           result-checking passes per size, 0 to skip (1)\n"
    "  -d, --datatype <t|all>    int8 uint8 int32 uint32 int64 uint64 half float double\n"
    "                            bfloat16 f8e4m3 f8e5m2 (float)\n"
    "  -o, --op <op|all>         sum prod max min avg premulsum (sum)\n"
    "  -r, --root <r|all>        root rank of rooted collectives (0)\n"
    "  -z, --blocking <0/1>      1: blocking communicators; 0: config.blocking = 0,\n"
    "                            calls may return ncclInProgress and are polled (1)\n"
    "  -a, --average <0-3>       time reported: 0 rank 0, 1 mean, 2 min, 3 max (1)\n"
    "  -G, --cudagraph <n>       GPU mode: capture the timed iterations in a CUDA graph\n"
    "                            and replay it n times; 0 = plain launches (0)\n"
    "  -R, --local_register <0/1> 1: register the send and receive buffers with\n"
    "                            ncclCommRegister (zero-copy point-to-point where possible) (0)\n"
    "  --wire <w>                native bf16 fp8 int8: all_reduce_perf and reduce_scatter_perf\n"
    "                            call chorusAllReduceEx / chorusReduceScatterEx with that wire\n"
    "                            format; -c checks against its error bound (docs/wire.md) (native)\n"
    "  --deterministic <0/1>     1: the same calls with the deterministic (rank-order) sum (0)\n"
    "  -h, --help                this text\n"
    "Multi-process: run under chorusrun (or set CHORUS_RANK, CHORUS_WORLD_SIZE and\n"
    "NCCL_COMM_ID=host:port), or use the *_mpi variant under mpirun.\n";

// Long-only options (no nccl-tests letter).
constexpr int kOptWire = 1000;
constexpr int kOptDeterministic = 1001;

const option kLongOptions[] = {{"nthreads", required_argument, nullptr, 't'},
                               {"ngpus", required_argument, nullptr, 'g'},
                               {"minbytes", required_argument, nullptr, 'b'},
                               {"maxbytes", required_argument, nullptr, 'e'},
                               {"stepbytes", required_argument, nullptr, 'i'},
                               {"stepfactor", required_argument, nullptr, 'f'},
                               {"iters", required_argument, nullptr, 'n'},
                               {"warmup_iters", required_argument, nullptr, 'w'},
                               {"agg_iters", required_argument, nullptr, 'm'},
                               {"check", required_argument, nullptr, 'c'},
                               {"datatype", required_argument, nullptr, 'd'},
                               {"op", required_argument, nullptr, 'o'},
                               {"root", required_argument, nullptr, 'r'},
                               {"blocking", required_argument, nullptr, 'z'},
                               {"average", required_argument, nullptr, 'a'},
                               {"cudagraph", required_argument, nullptr, 'G'},
                               {"local_register", required_argument, nullptr, 'R'},
                               {"wire", required_argument, nullptr, kOptWire},
                               {"deterministic", required_argument, nullptr, kOptDeterministic},
                               {"help", no_argument, nullptr, 'h'},
                               {nullptr, 0, nullptr, 0}};

bool parseInt(const char* text, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseFactor(const char* text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= 1.0)) return false;
  *out = v;
  return true;
}

bool parseWire(const char* text, chorusWire_t* out) {
  static const struct {
    const char* name;
    chorusWire_t wire;
  } kWires[] = {{"native", chorusWireNative},
                {"bf16", chorusWireBfloat16},
                {"fp8", chorusWireFloat8e4m3},
                {"int8", chorusWireInt8}};
  for (const auto& w : kWires)
    if (std::strcmp(text, w.name) == 0) return (*out = w.wire), true;
  return false;
}

// Applies one option; false when its argument is invalid.
bool applyOption(int c, const char* arg, Options* o) {
  switch (c) {
    case 't':
      return parseInt(arg, 1, 1024, &o->nThreads);
    case 'g':
      return parseInt(arg, 1, 1024, &o->ranksPerThread);
    case 'b':
      return parseSize(arg, &o->minBytes);
    case 'e':
      return parseSize(arg, &o->maxBytes);
    case 'i':
      return parseSize(arg, &o->stepBytes) && o->stepBytes > 0;
    case 'f':
      return parseFactor(arg, &o->stepFactor);
    case 'n':
      return parseInt(arg, 1, 1 << 30, &o->iters);
    case 'w':
      return parseInt(arg, 0, 1 << 30, &o->warmupIters);
    case 'm':
      return parseInt(arg, 1, 1 << 20, &o->aggIters);
    case 'c':
      return parseInt(arg, 0, 1 << 20, &o->checkIters);
    case 'd':
      return parseTypes(arg, &o->types);
    case 'o':
      return parseOps(arg, &o->ops);
    case 'r':
      if (std::strcmp(arg, "all") == 0) return (o->root = -1), true;
      return parseInt(arg, 0, 1 << 30, &o->root);
    case 'z': {
      int v = 1;
      if (!parseInt(arg, 0, 1, &v)) return false;
      o->blockingInit = v != 0;
      return true;
    }
    case 'G':
      return parseInt(arg, 0, 1 << 20, &o->graphLaunches);
    case 'R': {
      int v = 0;
      if (!parseInt(arg, 0, 1, &v)) return false;
      o->registerBuffers = v != 0;
      return true;
    }
    case kOptWire:
      return parseWire(arg, &o->wire);
    case kOptDeterministic: {
      int v = 0;
      if (!parseInt(arg, 0, 1, &v)) return false;
      o->deterministic = v != 0;
      return true;
    }
    case 'a': {
      int v = 1;
      if (!parseInt(arg, 0, 3, &v)) return false;
      o->average = static_cast<Average>(v);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || end == text || text[0] == '-') return false;
  unsigned shift = 0;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      shift = 10;
      ++end;
      break;
    case 'm':
    case 'M':
      shift = 20;
      ++end;
      break;
    case 'g':
    case 'G':
      shift = 30;
      ++end;
      break;
    default:
      return false;
  }
  if (*end == 'B' || *end == 'b') ++end;  // accept "16MB" as well
  if (*end != '\0' || (shift && v > (~0ull >> shift))) return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

int parseOptions(int argc, char** argv, const char* tool, Options* opts, bool* done) {
  *done = false;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:w:m:c:d:o:r:z:a:G:R:h", kLongOptions, nullptr)) != -1) {
    if (c == 'h') {
      std::printf(kUsage, tool);
      *done = true;
      return 0;
    }
    if (c == '?' || !applyOption(c, optarg, opts)) {
      if (c >= kOptWire)
        std::fprintf(stderr, "%s: invalid argument '%s' for --%s\n", tool, optarg,
                     c == kOptWire ? "wire" : "deterministic");
      else if (c != '?')
        std::fprintf(stderr, "%s: invalid argument '%s' for -%c\n", tool, optarg, c);
      std::fprintf(stderr, "Try '%s -h' for the options.\n", tool);
      *done = true;
      return 2;
    }
  }
  if (optind < argc || opts->minBytes > opts->maxBytes) {
    std::fprintf(stderr, "%s: %s\n", tool, optind < argc ? "unexpected positional argument" : "-b must not exceed -e");
    *done = true;
    return 2;
  }
  return 0;
}

std::vector<size_t> sweepSizes(const Options& opts) {
  std::vector<size_t> sizes;
  size_t s = opts.minBytes;
  while (s <= opts.maxBytes) {
    sizes.push_back(s);
    size_t next;
    if (opts.stepFactor > 1.0) {
      next = static_cast<size_t>(static_cast<double>(s) * opts.stepFactor);
      if (next <= s) next = s + 1;  // -b 0 or tiny factors must still advance
    } else {
      next = s + opts.stepBytes;
    }
    if (next < s) break;  // overflow
    s = next;
  }
  return sizes;
}

}  // namespace chorus_bench
