#include "common/measure.h"

#include <chrono>

#include "common/check.h"
#include "common/wire_bound.h"

namespace chorus_bench {
namespace {

struct Pointers {
  char* send;
  char* recv;
};

// In-place runs take both pointers from the receive allocation at the
// collective's offsets, as NCCL users do (e.g. an all-gather whose input is
// its own slot of the output).
Pointers pointersFor(const Rank& r, const Layout& l, size_t elt, bool inPlace) {
  if (!inPlace) return {static_cast<char*>(r.send), static_cast<char*>(r.recv)};
  char* base = static_cast<char*>(r.recv);
  const size_t rank = static_cast<size_t>(r.rank);
  return {base + rank * l.sendInplaceOffset * elt, base + rank * l.recvInplaceOffset * elt};
}

// Bytes of the receive allocation an in-place run touches.
size_t inplaceExtent(const Layout& l, size_t elt, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t send = (n - 1) * l.sendInplaceOffset + l.sendCount;
  const size_t recv = (n - 1) * l.recvInplaceOffset + l.recvCount;
  return (send > recv ? send : recv) * elt;
}

// Fresh inputs and poisoned outputs for one checked launch.
void prepareCheck(Rank& r, const RowConfig& row, const ValueScheme& scheme, int nranks, bool inPlace) {
  const size_t elt = typeInfo(row.type).size;
  const Layout& l = row.layout;
  if (inPlace) {
    const size_t extent = inplaceExtent(l, elt, nranks);
    char* view = static_cast<char*>(r.mem.beginView(r.recv, extent, false));
    fillPoison(row.type, view, extent / elt);
    fillInput(scheme, r.rank, view + static_cast<size_t>(r.rank) * l.sendInplaceOffset * elt, l.sendCount);
    r.mem.endView(r.recv, view, extent, true);
    return;
  }
  void* in = r.mem.beginView(r.send, l.sendCount * elt, false);
  fillInput(scheme, r.rank, in, l.sendCount);
  r.mem.endView(r.send, in, l.sendCount * elt, true);
  void* out = r.mem.beginView(r.recv, l.recvCount * elt, false);
  fillPoison(row.type, out, l.recvCount);
  r.mem.endView(r.recv, out, l.recvCount * elt, true);
}

size_t verify(Rank& r, const RowConfig& row, const ValueScheme& scheme, const CollSpec& spec, int nranks,
              bool inPlace) {
  const size_t elt = typeInfo(row.type).size;
  std::vector<Segment> segments;
  spec.expected(row.layout, r.rank, nranks, row.root, &segments);
  char* recv = pointersFor(r, row.layout, elt, inPlace).recv;
  const size_t bytes = row.layout.recvCount * elt;
  const void* view = r.mem.beginView(recv, bytes, true);
  const size_t wrong = countWrong(scheme, view, segments);
  r.mem.endView(recv, const_cast<void*>(view), bytes, false);
  return wrong;
}

void syncAll(ThreadRanks& t) {
  for (auto& r : t.ranks) BENCH_NCCL(r->mem.sync(), r.get());
}

void launchGraphs(ThreadRanks& t) {
  for (auto& r : t.ranks) BENCH_NCCL(r->mem.launchGraph(), r.get());
}

// -G: the timed iterations are captured (thread-local capture, one graph per
// rank's stream), replayed once untimed so that uploading the graph is not
// timed, then replayed opts.graphLaunches times on the clock.
double timeGraph(ThreadRanks& t, const RowConfig& row, bool inPlace) {
  const Options& o = t.job->opts;
  for (auto& r : t.ranks) BENCH_NCCL(r->mem.beginCapture(), r.get());
  for (int i = 0; i < o.iters; ++i) launchAll(t, row, inPlace, o.aggIters, false);
  for (auto& r : t.ranks) BENCH_NCCL(r->mem.endCapture(), r.get());
  launchGraphs(t);
  syncAll(t);
  const auto start = std::chrono::steady_clock::now();
  for (int g = 0; g < o.graphLaunches; ++g) launchGraphs(t);
  syncAll(t);
  const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  for (auto& r : t.ranks) r->mem.retireGraph();
  return elapsed.count() / (static_cast<double>(o.iters) * o.aggIters * o.graphLaunches);
}

}  // namespace

void launchAll(ThreadRanks& t, const RowConfig& row, bool inPlace, int agg, bool wait) {
  const Job& job = *t.job;
  const size_t elt = typeInfo(row.type).size;
  const bool group = t.ranks.size() > 1 || agg > 1;
  if (group) BENCH_NCCL(ncclGroupStart(), nullptr);
  for (int a = 0; a < agg; ++a) {
    for (auto& rp : t.ranks) {
      Rank& r = *rp;
      const Pointers p = pointersFor(r, row.layout, elt, inPlace);
      const LaunchArgs args{p.send,
                            p.recv,
                            row.layout.paramCount,
                            row.type,
                            r.op,
                            row.root,
                            r.rank,
                            job.nranks,
                            r.comm,
                            r.mem.stream(),
                            job.opts.reduceConfigured() ? &job.reduceConfig : nullptr};
      BENCH_NCCL(job.spec->launch(args), &r);
    }
  }
  if (group) BENCH_NCCL(ncclGroupEnd(), t.ranks[0].get());
  waitReady(t);
  if (wait) syncAll(t);
}

double timeRow(ThreadRanks& t, const RowConfig& row, bool inPlace) {
  const Options& o = t.job->opts;
  if (o.graphLaunches > 0 && t.ranks[0]->mem.onDevice()) return timeGraph(t, row, inPlace);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) launchAll(t, row, inPlace, o.aggIters, false);
  syncAll(t);
  const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / (static_cast<double>(o.iters) * o.aggIters);
}

std::vector<double> checkRow(ThreadRanks& t, const RowConfig& row, bool inPlace) {
  const Job& job = *t.job;
  ValueScheme scheme(row.type, row.op, job.nranks);
  scheme.allowError(wireErrorBound(job.opts.wire, row.type, job.nranks, scheme.maxAbsInput(), row.op == BenchOp::Avg));
  std::vector<double> wrong(t.ranks.size(), 0.0);
  for (int c = 0; c < job.opts.checkIters; ++c) {
    for (auto& r : t.ranks) prepareCheck(*r, row, scheme, job.nranks, inPlace);
    launchAll(t, row, inPlace, 1);
    for (size_t i = 0; i < t.ranks.size(); ++i)
      wrong[i] += static_cast<double>(verify(*t.ranks[i], row, scheme, *job.spec, job.nranks, inPlace));
  }
  return wrong;
}

void fillForTiming(ThreadRanks& t, ncclDataType_t type, BenchOp op) {
  const ValueScheme scheme(type, op, t.job->nranks);
  const size_t elt = typeInfo(type).size;
  for (auto& rp : t.ranks) {
    Rank& r = *rp;
    void* s = r.mem.beginView(r.send, r.sendBytes, false);
    fillInput(scheme, r.rank, s, r.sendBytes / elt);
    r.mem.endView(r.send, s, r.sendBytes, true);
    void* d = r.mem.beginView(r.recv, r.recvBytes, false);
    fillInput(scheme, r.rank, d, r.recvBytes / elt);
    r.mem.endView(r.recv, d, r.recvBytes, true);
  }
}

}  // namespace chorus_bench
