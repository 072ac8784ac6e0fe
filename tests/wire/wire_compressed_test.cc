// Compressed wires (docs/wire.md): AllReduceEx and ReduceScatterEx of float,
// half and bf16 with sum and avg against an fp64 reference at 2, 8, 16 and
// 64 ranks, within the documented per-element bound; error feedback's O(1/T)
// convergence; the argument checks; groups; in place; and the
// CHORUS_WIRE / CHORUS_WIRE_MIN_BYTES / CHORUS_WIRE_FEEDBACK knobs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "core/comm.h"
#include "kernels/common/float_types.h"
#include "plan/dry_connectors.h"
#include "plan/plan_builder.h"
#include "wire/wire_plans.h"

namespace chorus::test {
namespace {

constexpr size_t kBlock = 256;

const char* wireName(chorusWire_t w) {
  switch (w) {
    case chorusWireBfloat16:
      return "bf16";
    case chorusWireFloat8e4m3:
      return "fp8";
    case chorusWireInt8:
      return "int8";
    default:
      return "native";
  }
}

// Rank r's input element i: mixed signs and magnitudes, blocks of very
// different scales, some exact zeros.
double inputValue(int r, size_t i) {
  const uint64_t h = (uint64_t(r) * 2654435761u + i * 2246822519u + 12345) % 1000003u;
  if (h % 97 == 0) return 0.0;
  const double scale = std::ldexp(1.0, int((i / kBlock) % 7) - 3);
  return (double(h % 20001) / 10000.0 - 1.0) * scale;
}

double toDouble(ncclDataType_t t, const void* p, size_t i) {
  if (t == ncclFloat32) return static_cast<const float*>(p)[i];
  const uint16_t b = static_cast<const uint16_t*>(p)[i];
  return t == ncclFloat16 ? halfToFloat(half_t{b}) : bf16ToFloat(bf16_t{b});
}

void store(ncclDataType_t t, void* p, size_t i, double v) {
  if (t == ncclFloat32)
    static_cast<float*>(p)[i] = float(v);
  else if (t == ncclFloat16)
    static_cast<uint16_t*>(p)[i] = floatToHalf(float(v)).bits;
  else
    static_cast<uint16_t*>(p)[i] = floatToBf16(float(v)).bits;
}

// `v` as the datatype holds it.
double asStored(ncclDataType_t t, double v) {
  char one[4];
  store(t, one, 0, v);
  return toDouble(t, one, 0);
}

size_t esize(ncclDataType_t t) { return t == ncclFloat32 ? 4 : 2; }

// docs/wire.md's bound for one element: s = sum over ranks of |x_r|, A = sum
// over ranks of their block absmax; both quantizations and the fp32
// accumulation; then the output type's rounding.
double elementBound(chorusWire_t w, ncclDataType_t t, int n, double s, double A, double result) {
  double e = 0;
  switch (w) {
    case chorusWireBfloat16:
      e = std::ldexp(s, -8) * 2.01;
      break;
    case chorusWireFloat8e4m3:
      e = std::ldexp(s, -4) * 2.07 + std::ldexp(A / 448.0, -10) * 2.1;
      break;
    default:
      e = A / 254.0 * 2.01;
      break;
  }
  e += s * n * std::ldexp(1.0, -23);
  const double out = t == ncclFloat32 ? 0 : std::ldexp(std::fabs(result) + e, t == ncclFloat16 ? -11 : -8);
  return e + out + 1e-30;
}

struct Errors {
  double maxRel = 0, sumRel = 0;
  size_t n = 0;
};

// One AllReduceEx / ReduceScatterEx checked element by element.
void checkCompressed(RankCtx& ctx, chorusWire_t w, ncclDataType_t t, ncclRedOp_t op, size_t count, bool scatter,
                     bool inPlace, Errors* errs = nullptr) {
  const int n = ctx.nranks, me = ctx.rank;
  const size_t sendN = scatter ? count * size_t(n) : count, es = esize(t);
  std::vector<char> send(sendN * es), recv(count * es);
  for (size_t i = 0; i < sendN; ++i) store(t, send.data(), i, inputValue(me, i));
  void* out = inPlace ? (scatter ? send.data() + size_t(me) * count * es : send.data()) : recv.data();
  chorusReduceConfig_t cfg = CHORUS_REDUCE_CONFIG_INIT;
  cfg.wire = w;
  const ncclResult_t res = scatter ? chorusReduceScatterEx(send.data(), out, count, t, op, &cfg, ctx.comm, nullptr)
                                   : chorusAllReduceEx(send.data(), out, count, t, op, &cfg, ctx.comm, nullptr);
  if (!ctx.expectResult(res, ncclSuccess, "compressed call")) return;
  const size_t base = scatter ? size_t(me) * count : 0;
  const double div = op == ncclAvg ? n : 1;
  // Per element: the exact sum, s = sum |x_r| and A = sum of the ranks' block
  // absmax (blocks start at each shard's start).
  std::vector<double> exact(count, 0.0), s(count, 0.0), A(count, 0.0), x(count);
  for (int r = 0; r < n; ++r) {
    for (size_t j = 0; j < count; ++j) x[j] = asStored(t, inputValue(r, base + j));
    for (size_t b0 = 0; b0 < count; b0 += kBlock) {
      const size_t b1 = std::min(count, b0 + kBlock);
      double a = 0;
      for (size_t j = b0; j < b1; ++j) a = std::max(a, std::fabs(x[j]));
      for (size_t j = b0; j < b1; ++j) {
        exact[j] += x[j];
        s[j] += std::fabs(x[j]);
        A[j] += a;
      }
    }
  }
  int bad = 0;
  for (size_t j = 0; j < count && bad < 3; ++j) {
    const double got = toDouble(t, out, j);
    const double lim = elementBound(w, t, n, s[j], A[j], exact[j]) / div;
    const double err = std::fabs(got - exact[j] / div);
    if (!(err <= lim)) {
      ctx.fail("rank %d: %s %s type %d op %d count %zu element %zu: %.9g, exact %.9g, error %.3g > bound %.3g", me,
               scatter ? "ReduceScatterEx" : "AllReduceEx", wireName(w), t, op, count, j, got, exact[j] / div, err,
               lim);
      ++bad;
    }
    if (errs && s[j] != 0) {  // error relative to the magnitude summed (sums near zero cancel)
      const double rel = err / (s[j] / div);
      errs->maxRel = std::max(errs->maxRel, rel);
      errs->sumRel += rel;
      ++errs->n;
    }
  }
}

const chorusWire_t kWires[] = {chorusWireBfloat16, chorusWireFloat8e4m3, chorusWireInt8};

class CompressedRanks : public ::testing::TestWithParam<int> {};

TEST_P(CompressedRanks, AllReduceExWithinBound) {
  runThreads(GetParam(), [](RankCtx& ctx) {
    for (chorusWire_t w : kWires)
      for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclBfloat16})
        for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
          Errors e;
          checkCompressed(ctx, w, t, op, 5000, false, false, &e);
          checkCompressed(ctx, w, t, op, 1, false, true);
          if (ctx.rank == 0 && t == ncclFloat32 && op == ncclSum)
            printf("[ wire ] %d ranks %s float sum: max error / sum|x| %.3g, mean %.3g\n", ctx.nranks, wireName(w),
                   e.maxRel, e.n ? e.sumRel / double(e.n) : 0.0);
        }
  });
}

TEST_P(CompressedRanks, ReduceScatterExWithinBound) {
  runThreads(GetParam(), [](RankCtx& ctx) {
    for (chorusWire_t w : kWires)
      for (ncclDataType_t t : {ncclFloat32, ncclBfloat16})
        for (bool inPlace : {false, true}) checkCompressed(ctx, w, t, ncclAvg, 777, true, inPlace);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, CompressedRanks, ::testing::Values(1, 2, 3, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

TEST(Compressed, ManyRanks) {
  for (int n : {16, 64}) {
    runThreads(n, [](RankCtx& ctx) {
      for (chorusWire_t w : kWires) {
        Errors e;
        checkCompressed(ctx, w, ncclFloat32, ncclSum, 3000, false, false, &e);
        if (ctx.rank == 0)
          printf("[ wire ] %d ranks %s float sum: max error / sum|x| %.3g, mean %.3g\n", ctx.nranks, wireName(w),
                 e.maxRel, e.n ? e.sumRel / double(e.n) : 0.0);
      }
    });
  }
}

TEST(Compressed, Processes) {
  runProcesses(3, [](RankCtx& ctx) {
    for (chorusWire_t w : kWires) {
      checkCompressed(ctx, w, ncclFloat32, ncclSum, 3001, false, false);
      checkCompressed(ctx, w, ncclBfloat16, ncclAvg, 3001, false, true);
      checkCompressed(ctx, w, ncclFloat16, ncclSum, 1001, true, false);
    }
  });
}

TEST(Compressed, LargeCountInPlaceSpansPieces) {
  runThreads(4, [](RankCtx& ctx) {
    for (chorusWire_t w : kWires) checkCompressed(ctx, w, ncclFloat32, ncclSum, 1 << 20, false, true);
  });
}

// Running mean of T calls with the same inputs: with feedback its error
// shrinks like 1/T; without, it stays where one call's is.
void checkFeedbackConverges(RankCtx& ctx) {
  const size_t count = 4096;
  const int T = 64;
  std::vector<float> in(count), out(count), residual(count, 0.0f);
  std::vector<double> exact(count, 0.0);
  for (size_t i = 0; i < count; ++i) {
    in[i] = float(inputValue(ctx.rank, i));
    for (int r = 0; r < ctx.nranks; ++r) exact[i] += double(float(inputValue(r, i)));
  }
  for (chorusWire_t w : kWires) {
    for (bool feedback : {false, true}) {
      chorusReduceConfig_t cfg = CHORUS_REDUCE_CONFIG_INIT;
      cfg.wire = w;
      cfg.residual = feedback ? residual.data() : nullptr;
      std::fill(residual.begin(), residual.end(), 0.0f);
      std::vector<double> sum(count, 0.0);
      double err1 = 0, errT = 0;
      for (int k = 1; k <= T; ++k) {
        if (!RANK_OK(ctx,
                     chorusAllReduceEx(in.data(), out.data(), count, ncclFloat32, ncclSum, &cfg, ctx.comm, nullptr)))
          return;
        double err = 0;
        for (size_t i = 0; i < count; ++i) {
          sum[i] += out[i];
          err = std::max(err, std::fabs(sum[i] / k - exact[i]));
        }
        if (k == 1) err1 = err;
        if (k == T) errT = err;
      }
      if (feedback && !(errT * T <= err1 * 8))
        ctx.fail("rank %d: %s with feedback: error %.3g after %d calls, %.3g after one: not O(1/T)", ctx.rank,
                 wireName(w), errT, T, err1);
      if (!feedback && w != chorusWireBfloat16 && !(errT > err1 * 0.5))
        ctx.fail("rank %d: %s without feedback: the error should not shrink (%.3g -> %.3g)", ctx.rank, wireName(w),
                 err1, errT);
    }
  }
}

TEST(Compressed, ErrorFeedbackConvergesAsOneOverT) { runThreads(4, checkFeedbackConverges); }

TEST(Compressed, ArgumentChecks) {
  runThreads(2, [](RankCtx& ctx) {
    std::vector<float> a(64, 1.0f), b(64);
    chorusReduceConfig_t cfg = CHORUS_REDUCE_CONFIG_INIT;
    cfg.wire = chorusWireInt8;
    auto expectInvalid = [&](ncclResult_t res, const char* what, const char* mention) {
      if (res != ncclInvalidArgument) {
        ctx.fail("rank %d: %s returned %d, expected ncclInvalidArgument", ctx.rank, what, res);
        return;
      }
      if (!std::strstr(ncclGetLastError(ctx.comm), mention))
        ctx.fail("rank %d: %s: message \"%s\" does not mention %s", ctx.rank, what, ncclGetLastError(ctx.comm),
                 mention);
    };
    expectInvalid(chorusAllReduceEx(a.data(), b.data(), 64, ncclInt32, ncclSum, &cfg, ctx.comm, nullptr), "int32",
                  "ncclFloat32, ncclFloat16 or ncclBfloat16");
    expectInvalid(chorusAllReduceEx(a.data(), b.data(), 64, ncclFloat32, ncclMax, &cfg, ctx.comm, nullptr), "max",
                  "ncclSum or ncclAvg");
    expectInvalid(chorusReduceScatterEx(a.data(), b.data(), 32, ncclFloat64, ncclSum, &cfg, ctx.comm, nullptr),
                  "double", "ncclFloat32");
    cfg.wire = static_cast<chorusWire_t>(9);
    expectInvalid(chorusAllReduceEx(a.data(), b.data(), 64, ncclFloat32, ncclSum, &cfg, ctx.comm, nullptr), "wire 9",
                  "invalid wire");
    cfg.wire = chorusWireNative;
    cfg.residual = b.data();
    expectInvalid(chorusAllReduceEx(a.data(), a.data(), 64, ncclFloat32, ncclSum, &cfg, ctx.comm, nullptr),
                  "native residual", "compressed wire");
    cfg.wire = chorusWireInt8;
    expectInvalid(chorusAllReduceEx(a.data(), b.data(), 64, ncclFloat32, ncclSum, &cfg, ctx.comm, nullptr),
                  "overlapping residual", "overlaps");
    // NULL config: the plain all-reduce, exact for these values.
    if (!RANK_OK(ctx, chorusAllReduceEx(a.data(), b.data(), 64, ncclFloat32, ncclSum, nullptr, ctx.comm, nullptr)))
      return;
    for (float v : b)
      if (v != 2.0f) {
        ctx.fail("rank %d: NULL config gave %g, expected 2", ctx.rank, v);
        return;
      }
  });
}

TEST(Compressed, InAGroupWithOtherCalls) {
  runThreads(3, [](RankCtx& ctx) {
    const size_t count = 2000;
    std::vector<float> a(count), b(count), c(count), d(count), e2(count);
    for (size_t i = 0; i < count; ++i) a[i] = c[i] = e2[i] = float(inputValue(ctx.rank, i));
    chorusReduceConfig_t i8 = CHORUS_REDUCE_CONFIG_INIT, det = CHORUS_REDUCE_CONFIG_INIT;
    i8.wire = chorusWireInt8;
    det.deterministic = 1;
    bool ok = RANK_OK(ctx, ncclGroupStart());
    ok = ok && RANK_OK(ctx, chorusAllReduceEx(a.data(), b.data(), count, ncclFloat32, ncclSum, &i8, ctx.comm, nullptr));
    ok = ok && RANK_OK(ctx, ncclAllReduce(c.data(), d.data(), count, ncclFloat32, ncclSum, ctx.comm, nullptr));
    ok = ok &&
         RANK_OK(ctx, chorusAllReduceEx(e2.data(), e2.data(), count, ncclFloat32, ncclSum, &det, ctx.comm, nullptr));
    ok = RANK_OK(ctx, ncclGroupEnd()) && ok;
    if (!ok) return;
    for (size_t i = 0; i < count; ++i) {
      float e = float(inputValue(0, i));
      for (int r = 1; r < ctx.nranks; ++r) e += float(inputValue(r, i));
      if (std::memcmp(&e, &e2[i], 4) != 0) {
        ctx.fail("rank %d: deterministic element %zu in a group: %g, expected %g", ctx.rank, i, e2[i], e);
        return;
      }
      if (std::fabs(b[i] - e) > 0.3 || std::fabs(d[i] - e) > 1e-5) {  // int8: 3 ranks x absmax 8 / 127
        ctx.fail("rank %d: element %zu: int8 %g, native %g, exact %g", ctx.rank, i, b[i], d[i], e);
        return;
      }
    }
  });
}

// CHORUS_WIRE applies to large enough plain calls only; the output then is
// the quantized sum (not exact), below the threshold the exact one.
TEST(Compressed, EnvironmentKnobs) {
  RunOptions o;
  o.env = {{"CHORUS_WIRE", "int8"}, {"CHORUS_WIRE_MIN_BYTES", "16384"}, {"CHORUS_WIRE_FEEDBACK", "1"}};
  runThreads(
      2,
      [](RankCtx& ctx) {
        for (size_t count : {size_t(1000), size_t(8192)}) {
          std::vector<float> in(count), out(count), mean(count, 0.0f);
          for (size_t i = 0; i < count; ++i) in[i] = float(inputValue(ctx.rank, i)) / 3.0f;
          size_t inexact = 0;
          double err1 = 0, err = 0;
          for (int k = 1; k <= 16; ++k) {
            if (!RANK_OK(ctx, ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, ctx.comm, nullptr)))
              return;
            err = 0;
            for (size_t i = 0; i < count; ++i) {
              const float e = float(inputValue(0, i)) / 3.0f + float(inputValue(1, i)) / 3.0f;
              inexact += k == 1 && out[i] != e;
              mean[i] += (out[i] - mean[i]) / float(k);
              err = std::max(err, double(std::fabs(mean[i] - e)));
            }
            if (k == 1) err1 = err;
          }
          const bool compressed = count * 4 >= 16384;
          if (compressed != (inexact > 0))
            ctx.fail("rank %d: %zu floats: %zu inexact elements, expected %s", ctx.rank, count, inexact,
                     compressed ? "some (compressed)" : "none (below CHORUS_WIRE_MIN_BYTES)");
          if (compressed && !(err * 16 <= err1 * 4))
            ctx.fail("rank %d: library-managed feedback: mean error %.3g after 16 calls, %.3g after one", ctx.rank, err,
                     err1);
        }
      },
      o);
}

// --- across hosts: the two-level form (plan_wire_hosts.cc) ------------------

// Every rank's AllReduceEx output, gathered: all must be bit-identical.
void checkSameEverywhere(RankCtx& ctx, chorusWire_t w, ncclDataType_t t, size_t count) {
  const size_t es = esize(t);
  std::vector<char> send(count * es), out(count * es), all(count * es * size_t(ctx.nranks));
  for (size_t i = 0; i < count; ++i) store(t, send.data(), i, inputValue(ctx.rank, i));
  chorusReduceConfig_t cfg = CHORUS_REDUCE_CONFIG_INIT;
  cfg.wire = w;
  if (!RANK_OK(ctx, chorusAllReduceEx(send.data(), out.data(), count, t, ncclSum, &cfg, ctx.comm, nullptr)) ||
      !RANK_OK(ctx, ncclAllGather(out.data(), all.data(), count * es, ncclUint8, ctx.comm, nullptr)))
    return;
  for (int r = 0; r < ctx.nranks; ++r)
    if (std::memcmp(all.data() + size_t(r) * count * es, out.data(), count * es) != 0) {
      ctx.fail("rank %d: %s result differs from rank %d's", ctx.rank, wireName(w), r);
      return;
    }
}

using HostsParam = std::tuple<int, int>;  // ranks, hosts
class CompressedHosts : public ::testing::TestWithParam<HostsParam> {};

TEST_P(CompressedHosts, WithinBoundAndIdenticalOnEveryRank) {
  const auto [nranks, hosts] = GetParam();
  auto graph = hostsGraph(nranks, hosts, true);
  ASSERT_TRUE(graph && graph->nhosts == hosts && graph->ranksPerHost == nranks / hosts);
  runThreads(nranks, [&](RankCtx& ctx) {
    ctx.comm->graph = graph;  // before the first operation builds a plan
    for (chorusWire_t w : kWires) {
      for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclBfloat16})
        for (ncclRedOp_t op : {ncclSum, ncclAvg}) checkCompressed(ctx, w, t, op, 5000, false, false);
      checkCompressed(ctx, w, ncclFloat32, ncclSum, 1, false, true);
      checkCompressed(ctx, w, ncclFloat32, ncclSum, 300001, false, true);  // many pieces per shard
      for (bool inPlace : {false, true}) checkCompressed(ctx, w, ncclBfloat16, ncclAvg, 777, true, inPlace);
      checkSameEverywhere(ctx, w, ncclFloat32, 70001);
    }
  });
}

TEST_P(CompressedHosts, ErrorFeedbackConvergesAsOneOverT) {
  const auto [nranks, hosts] = GetParam();
  auto graph = hostsGraph(nranks, hosts, true);
  runThreads(nranks, [&](RankCtx& ctx) {
    ctx.comm->graph = graph;
    checkFeedbackConverges(ctx);
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, CompressedHosts,
                         ::testing::Values(HostsParam{4, 2}, HostsParam{6, 3}, HostsParam{8, 4}, HostsParam{6, 2}),
                         [](const ::testing::TestParamInfo<HostsParam>& i) {
                           return std::to_string(std::get<0>(i.param)) + "ranks" +
                                  std::to_string(std::get<1>(i.param)) + "hosts";
                         });

// What crosses between hosts: with the two-level form only ranks at the same
// local position are connected across hosts (one encoded sum per host and
// shard), each combining H-1 shards; CHORUS_WIRE_HOSTS=0 is the flat form,
// where every rank reaches every other. Plans built against connectors that
// only record their keys (DryConnectors), for every rank.
void checkCrossHostLinks(bool twoLevel) {
  const int nranks = 8, hosts = 4, G = nranks / hosts;
  auto graph = hostsGraph(nranks, hosts, true);
  ASSERT_TRUE(graph);
  auto localPos = [&](int r) { return graph->ring(0).position[r] - graph->ring(0).hostStart[graph->hostOfRank[r]]; };
  CommConfig config;
  config.wireHosts = twoLevel;
  for (int rank = 0; rank < nranks; ++rank) {
    DryConnectors dry;
    Plan plan;
    Task t = floatSumTask(size_t(1) << 16);
    t.wire.format = chorusWireInt8;
    plan.tasks.push_back(t);
    PlanBuilder builder(PlanContext{rank, nranks, &config, graph.get(), nullptr, &dry}, &plan);
    ASSERT_EQ(builder.build(), ncclSuccess);
    int crossPeers = 0, hostSums = 0;
    for (const ConnRef& c : plan.conns) {
      const DryConnectors::Info* info = dry.info(c.recv ? static_cast<const void*>(c.recv) : c.send);
      ASSERT_NE(info, nullptr);
      const int peer = info->key.peer;
      if (graph->hostOfRank[peer] == graph->hostOfRank[rank]) continue;
      ++crossPeers;
      if (twoLevel) {
        EXPECT_EQ(localPos(peer), localPos(rank)) << "rank " << rank << " connects to rank " << peer << " across hosts";
      }
    }
    for (const Lane& lane : plan.lanes)
      for (const sched::Segment& seg : lane.segments) hostSums += seg.kind == sched::SegmentKind::WireHostSum;
    // Two-level: contributions out and in, results out and in, with each
    // other host's rank at this position; flat: with every rank of the others.
    EXPECT_EQ(crossPeers, twoLevel ? 4 * (hosts - 1) : 4 * (nranks - G)) << "rank " << rank;
    EXPECT_EQ(hostSums, twoLevel ? hosts - 1 : 0) << "rank " << rank;
  }
}

TEST(CompressedHostsPlan, OnlySameLocalPositionsConnectAcrossHosts) { checkCrossHostLinks(true); }
TEST(CompressedHostsPlan, FlatFormWhenDisabled) { checkCrossHostLinks(false); }

}  // namespace
}  // namespace chorus::test
