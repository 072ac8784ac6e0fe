// Gloo reference point for all_reduce_perf: Gloo's ring all-reduce over its
// TCP transport on 127.0.0.1, float sums, printed in the same columns.
//
//   chorusrun -n 2 gloo_allreduce_bench [-A ring|opts] [-b 8] [-e 256M] [-f 2] [-n 20] [-w 5] [-c 1]
//
// -A ring (default): the classic algorithm object gloo::AllreduceRing<float>,
//    built once per size and run repeatedly; it reduces in place, so the
//    out-of-place column includes copying the input into the output first.
// -A opts: gloo::allreduce() with AllreduceOptions and Algorithm::RING, set up
//    on every call (the newer API, with separate input and output buffers).
//
// Process rank and count come from CHORUS_RANK / CHORUS_WORLD_SIZE (or
// OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE under mpirun). The processes
// meet through a gloo::rendezvous::FileStore in GLOO_STORE_DIR, by default
// /tmp/chorus-gloo-<port of NCCL_COMM_ID> (chorusrun picks a fresh port per
// job, so every job gets its own directory; rank 0 removes it at the end).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "compare/sweep.h"

namespace {

using Context = std::shared_ptr<gloo::Context>;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

int envInt(const char* a, const char* b, int fallback) {
  for (const char* name : {a, b})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return fallback;
}

std::string storeDir() {
  if (const char* dir = std::getenv("GLOO_STORE_DIR")) return dir;
  std::string id = std::getenv("NCCL_COMM_ID") ? std::getenv("NCCL_COMM_ID") : "default";
  const size_t colon = id.rfind(':');
  return "/tmp/chorus-gloo-" + (colon == std::string::npos ? id : id.substr(colon + 1));
}

void barrier(const Context& ctx) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}

// One all-reduce with the options API: out = sum over ranks of in (or of
// out itself when in is null).
void allreduceOpts(const Context& ctx, const float* in, float* out, size_t count) {
  gloo::AllreduceOptions opts(ctx);
  if (in) opts.setInput(const_cast<float*>(in), count);
  opts.setOutput(out, count);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
  gloo::allreduce(opts);
}

// All-reduces of `count` floats into `out`, through the API -A chose.
// Constructing one is collective (the ring object sets up its buffers).
class Runner {
 public:
  Runner(const Context& ctx, bool classic, float* out, size_t count) : ctx_(ctx), out_(out), count_(count) {
    if (classic) ring_ = std::make_unique<gloo::AllreduceRing<float>>(ctx, std::vector<float*>{out}, count);
  }
  // in == nullptr: in place.
  void run(const float* in) {
    if (!ring_) return allreduceOpts(ctx_, in, out_, count_);
    if (in) std::memcpy(out_, in, count_ * sizeof(float));
    ring_->run();
  }

 private:
  Context ctx_;
  float* out_;
  size_t count_;
  std::unique_ptr<gloo::AllreduceRing<float>> ring_;
};

double meanOverRanks(const Context& ctx, double v) {
  std::vector<float> buf{static_cast<float>(v)};
  allreduceOpts(ctx, nullptr, buf.data(), 1);
  return buf[0] / ctx->size;
}

double timeAllreduce(const Context& ctx, Runner& runner, const float* in, int iters) {
  barrier(ctx);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) runner.run(in);
  const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - start;
  return meanOverRanks(ctx, us.count() / iters);
}

long checkAllreduce(const Context& ctx, Runner& runner, std::vector<float>& in, std::vector<float>& out, size_t count,
                    bool inPlace) {
  for (size_t i = 0; i < count; ++i) {
    (inPlace ? out : in)[i] = compare::inputValue(ctx->rank, i);
    if (!inPlace) out[i] = -1.0f;
  }
  runner.run(inPlace ? nullptr : in.data());
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += out[i] != compare::expectedSum(ctx->size, i);
  std::vector<float> total{static_cast<float>(wrong)};
  allreduceOpts(ctx, nullptr, total.data(), 1);
  return static_cast<long>(total[0]);
}

Context connect(int rank, int size) {
  const std::string dir = storeDir();
  ::mkdir(dir.c_str(), 0700);  // every rank tries; all but one see EEXIST
  gloo::rendezvous::FileStore store(dir);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->connectFullMesh(store, dev);
  return ctx;
}

}  // namespace

int main(int argc, char** argv) {
  const int rank = envInt("CHORUS_RANK", "OMPI_COMM_WORLD_RANK", 0);
  const int size = envInt("CHORUS_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1);
  compare::SweepOptions o;
  bool classic = true;
  if (argc > 2 && std::strcmp(argv[1], "-A") == 0) {
    classic = std::strcmp(argv[2], "opts") != 0;
    if (classic && std::strcmp(argv[2], "ring") != 0) argc = 0;  // unknown API: usage below
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  if (argc < 1 || !compare::parseSweep(argc, argv, &o) || rank < 0 || rank >= size) {
    std::fprintf(stderr,
                 "usage: chorusrun -n N gloo_allreduce_bench [-A ring|opts] [-b min] [-e max] [-f factor] "
                 "[-n iters] [-w warmup] [-c 0/1]\n");
    return 2;
  }
  const Context ctx = connect(rank, size);
  const size_t maxCount = o.maxBytes / sizeof(float);
  std::vector<float> in(maxCount + 1, 1.0f);
  std::vector<float> out(maxCount + 1, 0.0f);
  if (rank == 0)
    compare::printHeader(classic ? "Gloo AllreduceRing (tcp 127.0.0.1)" : "Gloo allreduce() ring (tcp 127.0.0.1)", size,
                         o);
  if (o.warmup > 0 && maxCount) {
    Runner warm(ctx, classic, out.data(), maxCount);
    timeAllreduce(ctx, warm, in.data(), o.warmup);
  }
  long wrongTotal = 0;
  double bwSum = 0;
  int rows = 0;
  for (size_t bytes : compare::sweepSizes(o)) {
    const size_t count = bytes / sizeof(float);
    if (count == 0) continue;  // Gloo rejects empty all-reduces
    Runner runner(ctx, classic, out.data(), count);
    const double oop = timeAllreduce(ctx, runner, in.data(), o.iters);
    const long wOop = o.check ? checkAllreduce(ctx, runner, in, out, count, false) : 0;
    const double ip = timeAllreduce(ctx, runner, nullptr, o.iters);
    const long wIp = o.check ? checkAllreduce(ctx, runner, in, out, count, true) : 0;
    wrongTotal += wOop + wIp;
    bwSum += compare::busBw(bytes, oop, size) + compare::busBw(bytes, ip, size);
    rows += 2;
    if (rank == 0) {
      compare::printRowStart(count * sizeof(float), count);
      compare::printHalf(count * sizeof(float), oop, size, wOop, o.check != 0);
      compare::printHalf(count * sizeof(float), ip, size, wIp, o.check != 0);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (rank == 0) compare::printSummary(wrongTotal, rows ? bwSum / rows : 0);
  barrier(ctx);
  if (rank == 0) {
    std::error_code ec;
    std::filesystem::remove_all(storeDir(), ec);
  }
  return wrongTotal ? 1 : 0;
}
