// Single-thread speed of the host wire codecs (docs/wire.md), the loops the
// host executor runs (src/host/wire_blocks.h), next to memcpy on the same
// buffers as the physical yardstick. Rates count fp32 bytes in (4 bytes per
// element) per second, also for decode (whose input is the encoding):
//   encode    a rank's contribution to another rank's shard (wireSend)
//   decode    a gathered result into the output (wireGather)
//   accum     the owner's combine of one peer's contribution with its own
//             input (wireOwn, 2 ranks, no gather phase): decode + add
//
//   wire_codec_speed [-s 64M] [-n 5] [-l portable|avx2|both]
//
// Prints one line per (format, loop, SIMD level) with the median and best of
// -n timed passes over the whole buffer, in pieces of 64 Ki elements.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host/host_reduce.h"
#include "host/wire_blocks.h"

namespace {

using chorus::host::SimdLevel;
using chorus::wire::Format;

constexpr uint64_t kPieceElems = uint64_t(64) << 10;

struct Buffers {
  size_t n;
  std::vector<float> x, y;
  std::vector<uint8_t> enc;
};

struct Rate {
  double median, best;
};

template <typename F>
Rate timeIt(int reps, double bytes, F&& pass) {
  pass();  // warm-up: pages faulted in, caches and branch predictors settled
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    rates.push_back(bytes / 1e9 / s.count());
  }
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], rates.back()};
}

chorus::host::WirePiece piece(Format f, uint64_t n) { return {f, ncclFloat32, chorus::ReduceKind::Sum, nullptr, 1, n}; }

// Calls step(offset, elements, encodedOffset) for each piece of the buffer.
template <typename F>
void forPieces(Format f, size_t n, F&& step) {
  uint64_t enc = 0;
  for (uint64_t i = 0; i < n; i += kPieceElems) {
    const uint64_t m = std::min<uint64_t>(kPieceElems, n - i);
    step(i, m, enc);
    enc += chorus::wire::encodedBytes(f, 4, m);
  }
}

void runFormat(Buffers& b, Format f, const char* name, const char* level, int reps) {
  const double bytes = double(b.n) * 4;
  const Rate enc = timeIt(reps, bytes, [&] {
    forPieces(f, b.n, [&](uint64_t i, uint64_t m, uint64_t e) {
      chorus::host::wireSend(piece(f, m), b.x.data() + i, nullptr, b.enc.data() + e);
    });
  });
  const Rate dec = timeIt(reps, bytes, [&] {
    forPieces(f, b.n, [&](uint64_t i, uint64_t m, uint64_t e) {
      chorus::host::wireGather(piece(f, m), b.enc.data() + e, b.y.data() + i);
    });
  });
  const Rate acc = timeIt(reps, bytes, [&] {
    forPieces(f, b.n, [&](uint64_t i, uint64_t m, uint64_t e) {
      const uint8_t* in[2] = {nullptr, b.enc.data() + e};
      chorus::host::wireOwn(piece(f, m), {2, 0, in, nullptr, b.x.data() + i, nullptr, b.y.data() + i, nullptr});
    });
  });
  std::printf("%-5s %-8s encode %6.2f (best %6.2f)  decode %6.2f (best %6.2f)  accum %6.2f (best %6.2f) GB/s\n", name,
              level, enc.median, enc.best, dec.median, dec.best, acc.median, acc.best);
}

bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  const std::string suffix = end ? end : "";
  const size_t mult = suffix == "K" ? 1u << 10 : suffix == "M" ? 1u << 20 : suffix == "G" ? 1u << 30 : 1u;
  if (v == 0 || !(suffix.empty() || mult > 1)) return false;
  *out = size_t(v) * mult;
  return true;
}

int usage() {
  std::fprintf(stderr, "usage: wire_codec_speed [-s bytes] [-n reps] [-l portable|avx2|both]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t(64) << 20;
  int reps = 5;
  std::string levels = "both";
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    if (flag == "-s" && parseSize(argv[i + 1], &bytes)) continue;
    if (flag == "-n" && (reps = std::atoi(argv[i + 1])) > 0) continue;
    if (flag == "-l" && (levels = argv[i + 1], levels == "portable" || levels == "avx2" || levels == "both")) continue;
    return usage();
  }
  Buffers b;
  b.n = bytes / 4;
  b.x.resize(b.n);
  b.y.assign(b.n, 0.0f);
  b.enc.assign(chorus::wire::encodedBytes(Format::Bf16, 4, b.n), 0);  // the widest compressed encoding
  // Gradient-like values: normal, magnitudes varying from block to block.
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (size_t i = 0; i < b.n; ++i) b.x[i] = g(rng) * float(1 + (i >> 8) % 7);
  std::vector<float> copy(b.n);
  const Rate mc = timeIt(reps, double(bytes), [&] { std::memcpy(copy.data(), b.x.data(), bytes); });
  std::printf("# %zu bytes of fp32, %d passes, one thread; detected SIMD level %s\n", bytes, reps,
              chorus::host::detectedSimdLevel() == SimdLevel::Avx2 ? "avx2" : "portable");
  std::printf("memcpy         %6.2f (best %6.2f) GB/s\n", mc.median, mc.best);
  const SimdLevel previous = chorus::host::activeSimdLevel();
  for (SimdLevel level : {SimdLevel::Portable, SimdLevel::Avx2}) {
    const char* name = level == SimdLevel::Avx2 ? "avx2" : "portable";
    if (levels != "both" && levels != name) continue;
    if (chorus::host::setSimdLevel(level), chorus::host::activeSimdLevel() != level) continue;
    runFormat(b, Format::Bf16, "bf16", name, reps);
    runFormat(b, Format::Fp8, "fp8", name, reps);
    runFormat(b, Format::Int8, "int8", name, reps);
  }
  chorus::host::setSimdLevel(previous);
  return 0;
}
