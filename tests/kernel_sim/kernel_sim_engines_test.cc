// One engine, checked: the same plan run by the host executor
// (src/host/step_exec.cc) and by the lane kernel's device code on CPU
// threads (sim_rank.h) must give the same bits, since both take every
// decision with src/sched/segment.h and kernels/common/step_rules.h and
// combine the same operands in the same order. Random floats, so any
// difference in order shows.
#include <gtest/gtest.h>

#include <barrier>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernel_sim/sim_checks.h"
#include "kernel_sim/sim_rank.h"

namespace chorus {
namespace {

using namespace chorus::test;

using Case = std::tuple<const char*, const char*, CollType>;
class KernelAndHostExecutor : public ::testing::TestWithParam<Case> {};

TEST_P(KernelAndHostExecutor, GiveTheSameBits) {
  const auto [algo, proto, coll] = GetParam();
  const int nranks = std::string(algo) == "Direct" ? 4 : 3;
  const size_t count = std::string(proto) == "LL" ? 5003 : 60013;
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", algo}, {"NCCL_PROTO", proto}};
  std::barrier ready(nranks);
  runThreads(
      nranks,
      [&, coll = coll](RankCtx& ctx) {
        SimRank sim(ctx, ready);
        const size_t inCount = coll == CollType::ReduceScatter ? count * static_cast<size_t>(nranks) : count;
        std::vector<float> in(inCount), byHost(count, -1.0f), byKernel(count, -2.0f);
        std::mt19937 rng(1234u + static_cast<unsigned>(ctx.rank));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float& v : in) v = dist(rng);
        Plan hostPlan;
        hostPlan.comm = ctx.comm;
        hostPlan.tasks.push_back(simTask(ctx, coll, ncclFloat32, sumOf(ncclFloat32), in.data(), byHost.data(), count));
        if (!ctx.expectResult(sim.runHostExecutor(hostPlan), ncclSuccess, "the host executor")) return;
        Plan kernelPlan;
        kernelPlan.comm = ctx.comm;
        kernelPlan.tasks.push_back(
            simTask(ctx, coll, ncclFloat32, sumOf(ncclFloat32), in.data(), byKernel.data(), count));
        SimOutcome o;
        if (!sim.runKernels(kernelPlan, &o)) return;
        std::vector<float> want(byHost);
        expectExact(ctx, o, byKernel, want, "kernel against host executor");
        // Same values is not enough: compare the bits (a -0 against a +0 would pass above).
        if (!sameBits(byHost, byKernel))
          ctx.fail("rank %d: the kernel's bits differ from the host executor's", ctx.rank);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(
    Reductions, KernelAndHostExecutor,
    ::testing::Values(Case{"Ring", "Simple", CollType::AllReduce}, Case{"Ring", "LL", CollType::AllReduce},
                      Case{"Tree", "Simple", CollType::AllReduce}, Case{"Tree", "LL", CollType::AllReduce},
                      Case{"Direct", "Simple", CollType::AllReduce}, Case{"Direct", "LL", CollType::AllReduce},
                      Case{"Ring", "Simple", CollType::ReduceScatter}, Case{"Ring", "LL", CollType::ReduceScatter}),
    [](const auto& info) {
      return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_" +
             collName(std::get<2>(info.param));
    });

}  // namespace
}  // namespace chorus
