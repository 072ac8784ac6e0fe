// The body of one benchmark thread: create its communicators, allocate
// buffers, run the sweep row by row (every rank of the job measures, rank 0
// prints), then tear down.
#include <algorithm>
#include <array>
#include <cstdio>
#include <thread>

#include "chorus/chorus.h"
#include "common/agree.h"
#include "common/check.h"
#include "common/context.h"
#include "common/measure.h"
#include "common/report.h"

namespace chorus_bench {
namespace {

void initComms(ThreadRanks& t) {
  const Job& job = *t.job;
  const int perThread = job.opts.ranksPerThread;
  const int first = (job.world.rank * job.opts.nThreads + t.thread) * perThread;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = job.opts.blockingInit ? 1 : 0;
  for (int g = 0; g < perThread; ++g) {
    t.ranks.push_back(std::make_unique<Rank>());
    t.ranks.back()->rank = first + g;
  }
  // Several communicators created by one thread must be created in one group.
  // A GPU-mode communicator takes the device current at its init call: as in
  // nccl-tests, the ranks of this machine go round-robin over its devices in
  // the order process, thread, rank of the thread.
  if (perThread > 1) BENCH_NCCL(ncclGroupStart(), nullptr);
  for (int g = 0; g < perThread; ++g) {
    Rank* r = t.ranks[static_cast<size_t>(g)].get();
    const int dev = deviceForLocalRank((job.world.localRank * job.opts.nThreads + t.thread) * perThread + g);
    if (dev >= 0) BENCH_NCCL(device::select(dev), r);
    BENCH_NCCL(ncclCommInitRankConfig(&r->comm, job.nranks, job.id, r->rank, &config), r);
  }
  if (perThread > 1) BENCH_NCCL(ncclGroupEnd(), nullptr);
  waitReady(t);
  for (auto& r : t.ranks) BENCH_NCCL(r->mem.init(r->comm), r.get());
}

// Buffers big enough for the largest row of every requested type.
void allocBuffers(ThreadRanks& t, const std::vector<size_t>& sizes) {
  const Job& job = *t.job;
  size_t sendBytes = 0;
  size_t recvBytes = 0;
  const size_t largest = sizes.empty() ? 0 : sizes.back();
  const auto n = static_cast<size_t>(job.nranks);
  for (ncclDataType_t type : job.opts.types) {
    const size_t elt = typeInfo(type).size;
    const Layout l = job.spec->layout(largest / elt, elt, job.nranks);
    const size_t inplace =
        std::max((n - 1) * l.sendInplaceOffset + l.sendCount, (n - 1) * l.recvInplaceOffset + l.recvCount);
    sendBytes = std::max(sendBytes, l.sendCount * elt);
    recvBytes = std::max({recvBytes, l.recvCount * elt, inplace * elt});
  }
  for (auto& r : t.ranks) {
    r->sendBytes = sendBytes;
    r->recvBytes = recvBytes;
    BENCH_NCCL(r->mem.alloc(sendBytes, &r->send), r.get());
    BENCH_NCCL(r->mem.alloc(recvBytes, &r->recv), r.get());
    BENCH_NCCL(r->mem.alloc(kMaxAgreeValues * sizeof(double), &r->scratch), r.get());
    BENCH_NCCL(r->mem.alloc(kRankLineBytes * static_cast<size_t>(job.nranks), &r->lines), r.get());
    if (job.opts.registerBuffers) {
      BENCH_NCCL(ncclCommRegister(r->comm, r->send, sendBytes, &r->sendHandle), r.get());
      BENCH_NCCL(ncclCommRegister(r->comm, r->recv, recvBytes, &r->recvHandle), r.get());
    }
  }
}

// Waits until every thread of the process has its buffers (see Job::allocated).
void allocationBarrier(Job& job) {
  job.allocated.fetch_add(1);
  while (job.allocated.load() < job.opts.nThreads) std::this_thread::yield();
}

void setOperator(ThreadRanks& t, ncclDataType_t type, BenchOp op) {
  for (auto& r : t.ranks) {
    if (op != BenchOp::PreMulSum) {
      r->op = builtinOp(op);
      continue;
    }
    unsigned char scalar[8];
    encodeValue(type, kPreMulScalar, scalar);
    BENCH_NCCL(ncclRedOpCreatePreMulSum(&r->op, scalar, type, ncclScalarHostImmediate, r->comm), r.get());
  }
}

void clearOperator(ThreadRanks& t, BenchOp op) {
  for (auto& r : t.ranks) {
    if (op == BenchOp::PreMulSum) BENCH_NCCL(ncclRedOpDestroy(r->op, r->comm), r.get());
    r->op = ncclSum;
  }
}

bool halfChecked(const Job& job, bool inPlace) {
  return job.opts.checkIters > 0 && (!inPlace || job.spec->inPlaceChecked);
}

// Bytes the rank's connectors have sent so far, over every link (chorusCommGetStats).
// Bytes this rank's connectors have sent: {every link, the network's}.
std::array<double, 2> bytesSent(const Rank& r) {
  chorusCommStats_t s{};
  s.size = sizeof s;
  BENCH_NCCL(chorusCommGetStats(r.comm, &s), &r);
  double sum = 0;
  for (uint64_t b : s.bytesSent) sum += static_cast<double>(b);
  return {sum, static_cast<double>(s.bytesSent[chorusLinkNet])};
}

// Times (and checks) one half of a row; returns {time, wrong, bytes sent
// per operation, of them over the network} per rank.
std::vector<std::vector<double>> measureHalf(ThreadRanks& t, const RowConfig& row, bool inPlace) {
  std::vector<std::array<double, 2>> before;
  for (auto& r : t.ranks) before.push_back(bytesSent(*r));
  const double us = timeRow(t, row, inPlace);
  const Options& o = t.job->opts;
  const double ops = static_cast<double>(o.iters) * o.aggIters * (o.graphLaunches > 0 ? o.graphLaunches + 1 : 1);
  std::vector<double> sent;
  std::vector<double> sentNet;
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    const std::array<double, 2> now = bytesSent(*t.ranks[i]);
    sent.push_back((now[0] - before[i][0]) / ops);
    sentNet.push_back((now[1] - before[i][1]) / ops);
  }
  std::vector<double> wrong(t.ranks.size(), 0.0);
  if (halfChecked(*t.job, inPlace)) wrong = checkRow(t, row, inPlace);
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < t.ranks.size(); ++i) out.push_back({us, wrong[i], sent[i], sentNet[i]});
  return out;
}

// Turns the per-rank {time, wrong} of both halves into what rank 0 prints.
void agreeRow(ThreadRanks& t, const std::vector<std::vector<double>>& oop, const std::vector<std::vector<double>>& ip,
              Measurement* mo, Measurement* mi) {
  const Job& job = *t.job;
  std::vector<std::vector<double>> times;
  std::vector<std::vector<double>> wrongs;  // and bytes sent
  for (size_t i = 0; i < oop.size(); ++i) {
    const bool counts = job.opts.average != Average::Rank0 || t.ranks[i]->rank == 0;
    times.push_back({counts ? oop[i][0] : 0.0, counts ? ip[i][0] : 0.0});
    wrongs.push_back({oop[i][1], ip[i][1], oop[i][2], ip[i][2], oop[i][3], ip[i][3]});
  }
  ncclRedOp_t op = ncclSum;
  if (job.opts.average == Average::Min) op = ncclMin;
  if (job.opts.average == Average::Max) op = ncclMax;
  std::vector<double> time = agree(t, times, op);
  const std::vector<double> wrong = agree(t, wrongs, ncclSum);
  if (job.opts.average == Average::Mean)
    for (double& v : time) v /= job.nranks;
  mo->timeUs = time[0];
  mi->timeUs = time[1];
  mo->wrong = halfChecked(job, false) ? wrong[0] : -1;
  mi->wrong = halfChecked(job, true) ? wrong[1] : -1;
  mo->wireBytes = wrong[2] / job.nranks;
  mi->wireBytes = wrong[3] / job.nranks;
  mo->netBytes = wrong[4] / job.nranks;
  mi->netBytes = wrong[5] / job.nranks;
}

void fillBandwidth(const CollSpec& spec, size_t bytes, int nranks, Measurement* m) {
  const double seconds = m->timeUs * 1e-6;
  m->algBw = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0;
  m->busBw = m->algBw * spec.busFactor(nranks);
}

struct Totals {
  double wrong = 0;
  double busBwSum = 0;
  int rows = 0;
};

void sweepConfig(ThreadRanks& t, ncclDataType_t type, BenchOp op, int root, const std::vector<size_t>& sizes,
                 Totals* totals) {
  const Job& job = *t.job;
  const size_t elt = typeInfo(type).size;
  setOperator(t, type, op);
  fillForTiming(t, type, op);
  RowConfig row{type, op, root, job.spec->layout(sizes.back() / elt, elt, job.nranks)};
  for (int i = 0; i < job.opts.warmupIters; ++i) launchAll(t, row, false, 1);
  row.layout = job.spec->layout(sizes.front() / elt, elt, job.nranks);
  for (int i = 0; i < job.opts.warmupIters; ++i) launchAll(t, row, false, 1);
  for (size_t bytes : sizes) {
    row.layout = job.spec->layout(bytes / elt, elt, job.nranks);
    const auto oop = measureHalf(t, row, false);
    const auto ip = measureHalf(t, row, true);
    Measurement mo;
    Measurement mi;
    agreeRow(t, oop, ip, &mo, &mi);
    const size_t rowBytes = std::max(row.layout.sendCount, row.layout.recvCount) * elt;
    fillBandwidth(*job.spec, rowBytes, job.nranks, &mo);
    fillBandwidth(*job.spec, rowBytes, job.nranks, &mi);
    totals->wrong += std::max(mo.wrong, 0.0) + std::max(mi.wrong, 0.0);
    totals->busBwSum += mo.busBw + mi.busBw;
    totals->rows += 2;
    if (t.printer()) printRow(rowBytes, row.layout.paramCount, row, *job.spec, mo, mi);
    if (t.printer() && job.spec->takesReduceConfig) printWireBytes(rowBytes, mo, mi);
  }
  clearOperator(t, op);
}

void teardown(ThreadRanks& t) {
  // Finalizing waits for the peers, so one thread cannot finalize its
  // communicators one after the other. NCCL allows grouping the calls, but
  // helper threads work whatever the library does with a grouped finalize.
  if (t.ranks.size() == 1) {
    BENCH_NCCL(ncclCommFinalize(t.ranks[0]->comm), t.ranks[0].get());
  } else {
    std::vector<std::thread> helpers;
    for (auto& r : t.ranks) helpers.emplace_back([&r] { BENCH_NCCL(ncclCommFinalize(r->comm), r.get()); });
    for (std::thread& h : helpers) h.join();
  }
  waitReady(t);
  for (auto& r : t.ranks) {
    if (r->sendHandle != nullptr) BENCH_NCCL(ncclCommDeregister(r->comm, r->sendHandle), r.get());
    if (r->recvHandle != nullptr) BENCH_NCCL(ncclCommDeregister(r->comm, r->recvHandle), r.get());
    BENCH_NCCL(ncclCommDestroy(r->comm), r.get());
    r->mem.release(r->send);
    r->mem.release(r->recv);
    r->mem.release(r->scratch);
    r->mem.release(r->lines);
  }
}

// -r all runs every rank as root in turn; unrooted collectives run once.
std::vector<int> rootsToRun(const Job& job) {
  if (!job.spec->rooted) return {0};
  if (job.opts.root >= 0) return {job.opts.root};
  std::vector<int> roots;
  for (int r = 0; r < job.nranks; ++r) roots.push_back(r);
  return roots;
}

}  // namespace

void runThread(Job* job, int thread) {
  ThreadRanks t;
  t.job = job;
  t.thread = thread;
  initComms(t);
  const std::vector<size_t> sizes = sweepSizes(job->opts);
  allocBuffers(t, sizes);
  allocationBarrier(*job);
  const std::vector<std::string> lines = gatherRankLines(t);
  if (t.printer()) {
    printPreamble(*job, lines);
    if (job->opts.graphLaunches > 0 && !t.ranks[0]->mem.onDevice())
      std::printf("# -G %d ignored: host-mode communicators run no CUDA graphs\n#\n", job->opts.graphLaunches);
    printTableHeader();
  }
  const std::vector<BenchOp> ops = job->spec->reduces ? job->opts.ops : std::vector<BenchOp>{BenchOp::None};
  Totals totals;
  for (ncclDataType_t type : job->opts.types)
    for (BenchOp op : ops)
      for (int root : rootsToRun(*job)) sweepConfig(t, type, op, root, sizes, &totals);
  if (t.printer()) printSummary(totals.wrong, totals.rows ? totals.busBwSum / totals.rows : 0.0);
  if (totals.wrong > 0) job->exitCode.store(1);
  teardown(t);
}

}  // namespace chorus_bench
