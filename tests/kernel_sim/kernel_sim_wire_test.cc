// The wire kernel's device code (kernels/colls/wire_kernel.cuh) on CPU
// threads (sim_rank.h): compressed and deterministic direct reductions
// (docs/wire.md), on one host and across 4 "hosts" of 2 ranks (the
// two-level form and the chains), must give the bits the host executor's
// wire loops give for the same plan, and leave the same error-feedback
// residual: both run kernels/common/wire_piece.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm.h"
#include "kernel_sim/sim_checks.h"
#include "kernel_sim/sim_rank.h"
#include "wire/wire_plans.h"

namespace chorus {
namespace {

using namespace chorus::test;

class KernelOnCpuWire : public ::testing::TestWithParam<std::tuple<WireLayout, int>> {};

TEST_P(KernelOnCpuWire, SameBitsAndResidualsAsTheHostExecutor) {
  const auto [layout, callIndex] = GetParam();
  const int nranks = std::get<0>(layout), hosts = std::get<1>(layout);
  const WireCall& call = kWireCalls[callIndex];
  auto graph = hostsGraph(nranks, hosts, false);
  ASSERT_TRUE(graph);
  std::barrier ready(nranks);
  RunOptions opts;
  opts.timeoutMs = 240000;
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        ctx.comm->graph = graph;
        SimRank sim(ctx, ready);
        constexpr size_t kCount = 24000;  // per rank: several pieces per shard
        const size_t count = call.type == CollType::ReduceScatter ? kCount / static_cast<size_t>(nranks) : kCount;
        const size_t elemBytes = typeSize(call.dtype);
        // Random inputs in the datatype (half: its bits), so any difference in order shows.
        std::vector<uint8_t> in(kCount * elemBytes);
        std::mt19937 rng(77u + static_cast<unsigned>(ctx.rank));
        std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
        for (size_t i = 0; i < kCount; ++i) {
          const float f = dist(rng);
          if (elemBytes == 2) {
            const uint16_t bits = floatToHalf(f).bits;
            std::memcpy(&in[i * 2], &bits, 2);
          } else {
            std::memcpy(&in[i * 4], &f, 4);
          }
        }
        std::vector<uint8_t> byHost(count * elemBytes, 0xAA), byKernel(count * elemBytes, 0x55);
        std::vector<float> residualHost(kCount, 0.0f), residualKernel(kCount, 0.0f);
        auto task = [&](void* out, std::vector<float>& residual) {
          Task t = simTask(ctx, call.type, call.dtype, sumOf(call.dtype), in.data(), out, count, call.root);
          t.wire.format = call.format;
          t.wire.deterministic = call.format == 0;
          t.wire.residual = call.format != 0 ? residual.data() : nullptr;
          return t;
        };
        Plan hostPlan;
        hostPlan.comm = ctx.comm;
        hostPlan.tasks.push_back(task(byHost.data(), residualHost));
        if (!ctx.expectResult(sim.runHostExecutor(hostPlan), ncclSuccess, "the host executor")) return;
        Plan kernelPlan;
        kernelPlan.comm = ctx.comm;
        kernelPlan.tasks.push_back(task(byKernel.data(), residualKernel));
        SimOutcome o;
        if (!sim.runKernels(kernelPlan, &o)) return;
        for (const std::string& f : o.faults) ctx.fail("rank %d: %s", ctx.rank, f.c_str());
        if (o.record.status != 0) {
          ctx.fail("rank %d: the wire kernel failed: %s", ctx.rank, describe(o, ctx.rank).c_str());
          return;
        }
        const bool defined = call.type != CollType::Reduce || ctx.rank == call.root;
        if (defined && byHost != byKernel) {
          size_t first = 0;
          while (byHost[first] == byKernel[first]) ++first;
          ctx.fail("rank %d: the wire kernel's output differs from the host executor's from byte %zu of %zu", ctx.rank,
                   first, byHost.size());
        }
        if (!sameBits(residualHost, residualKernel)) ctx.fail("rank %d: the residuals differ", ctx.rank);
        const bool fed = std::any_of(residualKernel.begin(), residualKernel.end(), [](float r) { return r != 0; });
        if (call.format != 0 && !fed) ctx.fail("rank %d: a compressed call left no residual", ctx.rank);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndCalls, KernelOnCpuWire,
                         ::testing::Combine(kWireLayouts, ::testing::Range(0, static_cast<int>(std::size(kWireCalls)))),
                         [](const auto& info) { return wireCaseName(info.param); });

}  // namespace
}  // namespace chorus
