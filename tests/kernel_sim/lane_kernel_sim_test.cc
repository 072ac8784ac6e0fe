// The lane kernel's device code (kernels/colls/lane_kernel.cuh), compiled for
// the CPU (cuda_sim.h), on real plans: each rank of a threads-as-ranks
// communicator builds its plan as GPU mode does, translates it, fills and
// packs each launch as the GPU executor does and runs it with the kernels'
// own code on CPU threads, over the communicator's FIFOs (sim_rank.h). The
// results must be exact and no block may misuse a barrier. What this does
// not cover (the GPU memory model, the vectorized loads on hardware,
// timing) is the device check's (tests/gpu/).
#include <gtest/gtest.h>

#include <barrier>
#include <string>
#include <tuple>
#include <vector>

#include "core/comm.h"
#include "kernel_sim/sim_checks.h"
#include "kernel_sim/sim_rank.h"
#include "kernels/common/direct_slot.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {

using namespace chorus::test;

// Input element i of `rank`: small integers, so float sums are exact in any order.
float inputValue(int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) * 7 + i) % 13); }

// What `coll` leaves in rank `rank`'s output (`count` per rank, root 0), or
// empty when that rank's output is not defined (a Reduce's non-root).
std::vector<float> expectedOutput(CollType coll, int rank, int nranks, size_t count) {
  std::vector<float> out;
  auto sumAt = [&](size_t i) {
    float s = 0;
    for (int r = 0; r < nranks; ++r) s += inputValue(r, i);
    return s;
  };
  switch (coll) {
    case CollType::AllReduce:
      for (size_t i = 0; i < count; ++i) out.push_back(sumAt(i));
      break;
    case CollType::Reduce:
      if (rank == 0)
        for (size_t i = 0; i < count; ++i) out.push_back(sumAt(i));
      break;
    case CollType::Broadcast:
      for (size_t i = 0; i < count; ++i) out.push_back(inputValue(0, i));
      break;
    case CollType::AllGather:
      for (int r = 0; r < nranks; ++r)
        for (size_t i = 0; i < count; ++i) out.push_back(inputValue(r, i));
      break;
    case CollType::ReduceScatter:
      for (size_t i = 0; i < count; ++i) out.push_back(sumAt(static_cast<size_t>(rank) * count + i));
      break;
    default:
      break;
  }
  return out;
}

// One call of `coll` with `count` per rank on the CPU kernels, checked.
void runAndCheck(RankCtx& ctx, SimRank& sim, CollType coll, size_t count, const char* what) {
  const size_t n = static_cast<size_t>(ctx.nranks);
  std::vector<float> in(coll == CollType::ReduceScatter ? count * n : count);
  for (size_t i = 0; i < in.size(); ++i) in[i] = inputValue(ctx.rank, i);
  std::vector<float> out(coll == CollType::AllGather ? count * n : count, -1.0f);
  if (coll == CollType::Broadcast && ctx.rank == 0) out = in;  // in place at the root
  Plan plan;
  plan.comm = ctx.comm;
  plan.tasks.push_back(simTask(ctx, coll, ncclFloat32, sumOf(ncclFloat32), in.data(), out.data(), count));
  SimOutcome o;
  if (!sim.runKernels(plan, &o)) return;
  expectExact(ctx, o, out, expectedOutput(coll, ctx.rank, ctx.nranks, count), what);
}

using Case = std::tuple<const char*, const char*, CollType>;
class KernelOnCpu : public ::testing::TestWithParam<Case> {};

// Two calls in a row (the second continues the connectors' counters and
// carries the next sequence numbers), ragged counts, several pieces per step.
TEST_P(KernelOnCpu, ResultsAreExact) {
  const auto [algo, proto, coll] = GetParam();
  const int nranks = std::string(algo) == "Direct" ? 4 : 3;
  const size_t firstCount = std::string(proto) == "LL" ? 3001 : 70001;
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", algo}};
  if (std::string(proto) != "Auto") opts.env.push_back({"NCCL_PROTO", proto});  // Auto: the tuner picks per call
  std::barrier ready(nranks);
  runThreads(
      nranks,
      [&, coll = coll](RankCtx& ctx) {
        SimRank sim(ctx, ready);
        runAndCheck(ctx, sim, coll, firstCount, "call 1");
        runAndCheck(ctx, sim, coll, 17, "call 2");
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(AlgosProtosColls, KernelOnCpu,
                         ::testing::Combine(::testing::Values("Ring", "Tree"), ::testing::Values("Simple", "LL"),
                                            ::testing::Values(CollType::AllReduce, CollType::AllGather,
                                                              CollType::ReduceScatter, CollType::Broadcast,
                                                              CollType::Reduce)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_" +
                                  collName(std::get<2>(info.param));
                         });
// Simple for the first call, LL for the second, on one communicator.
INSTANTIATE_TEST_SUITE_P(TunedProtos, KernelOnCpu,
                         ::testing::Combine(::testing::Values("Ring", "Tree"), ::testing::Values("Auto"),
                                            ::testing::Values(CollType::AllReduce)),
                         [](const auto& info) { return std::string(std::get<0>(info.param)) + "_Auto"; });
INSTANTIATE_TEST_SUITE_P(DirectProtos, KernelOnCpu,
                         ::testing::Combine(::testing::Values("Direct"), ::testing::Values("Simple", "LL"),
                                            ::testing::Values(CollType::AllReduce)),
                         [](const auto& info) { return std::string("Direct_") + std::get<1>(info.param); });

// Wider blocks split each piece differently among threads (the packs of
// step::splitElementwise, the LL lines); the results must not change.
TEST(KernelOnCpuBlocks, WiderBlocksGiveTheSameResults) {
  for (const char* proto : {"Simple", "LL"}) {
    RunOptions opts;
    opts.env = {{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", proto}};
    std::barrier ready(3);
    runThreads(
        3,
        [&](RankCtx& ctx) {
          SimRank sim(ctx, ready);
          for (int threads : {96, 256}) {
            sim.threads = threads;
            runAndCheck(ctx, sim, CollType::AllReduce, 20011, proto);
          }
        },
        opts);
  }
}

// The slots this rank's point-to-point send end to `peer` has published.
uint64_t slotsPostedTo(RankCtx& ctx, int peer) {
  const SendConnector* c =
      ctx.comm->conns->findSend(ConnKey{ConnClass::P2P, static_cast<uint8_t>(Proto::Simple), 0, peer});
  return c != nullptr ? c->end().ctl->tail.load() : 0;
}

// A ring send/recv, then an all-to-all, of `count` int32 per peer through
// the kernels, every element checked. `zeroCopy`: the input is registered,
// and each message must go as one descriptor.
void exchangeThroughKernels(RankCtx& ctx, SimRank& sim, size_t count, bool zeroCopy) {
  const int n = ctx.nranks, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
  auto value = [](int from, size_t i) { return static_cast<int32_t>(from * 1000003 + static_cast<int>(i)); };
  std::vector<int32_t> in(count * static_cast<size_t>(n)), out(in.size(), -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = value(ctx.rank, i);
  void* handle = nullptr;
  if (zeroCopy && !RANK_OK(ctx, ncclCommRegister(ctx.comm, in.data(), in.size() * sizeof(int32_t), &handle))) return;
  {
    Plan plan;
    plan.comm = ctx.comm;
    plan.tasks.push_back(simTask(ctx, CollType::Send, ncclInt32, sumOf(ncclInt32), in.data(), nullptr, count, next));
    plan.tasks.push_back(simTask(ctx, CollType::Recv, ncclInt32, sumOf(ncclInt32), nullptr, out.data(), count, prev));
    const uint64_t before = slotsPostedTo(ctx, next);
    SimOutcome o;
    if (!sim.runKernels(plan, &o)) return;
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = static_cast<float>(value(prev, i));
    expectExact(ctx, o, std::vector<int32_t>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(count)), want,
                "send/recv");
    const uint64_t posted = slotsPostedTo(ctx, next) - before;
    if (zeroCopy && posted != 1)
      ctx.fail("rank %d: %llu slots posted for one registered message, expected one descriptor", ctx.rank,
               static_cast<unsigned long long>(posted));
  }
  {
    Plan plan;
    plan.comm = ctx.comm;
    plan.tasks.push_back(simTask(ctx, CollType::AlltoAll, ncclInt32, sumOf(ncclInt32), in.data(), out.data(), count));
    SimOutcome o;
    if (!sim.runKernels(plan, &o)) return;
    std::vector<float> want;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i)
        want.push_back(static_cast<float>(value(p, static_cast<size_t>(ctx.rank) * count + i)));
    expectExact(ctx, o, out, want, "all-to-all");
  }
  if (zeroCopy) RANK_OK(ctx, ncclCommDeregister(ctx.comm, handle));
}

// Ring send/recv and an all-to-all: one byte-copy launch (uint8 sum) per
// group, whatever the datatype.
TEST(KernelOnCpuPointToPoint, SendRecvAndAllToAllMoveEveryByte) {
  std::barrier ready(3);
  runThreads(3, [&](RankCtx& ctx) {
    SimRank sim(ctx, ready);
    exchangeThroughKernels(ctx, sim, 5003, false);
  });
}

// Sends from a registered buffer between threads of one process go
// zero-copy (kernels/common/direct_slot.h): the kernel's directSend posts
// one descriptor per message and waits until the receiver, directReceive,
// has copied the message out of the sender's buffer in chunks.
TEST(KernelOnCpuPointToPoint, RegisteredSendsGoZeroCopy) {
  std::barrier ready(3);
  runThreads(3, [&](RankCtx& ctx) {
    SimRank sim(ctx, ready);
    exchangeThroughKernels(ctx, sim, kDirectChunkBytes / sizeof(int32_t) + 7, true);  // two chunks, ragged
  });
}

// Reductions other than a float sum, through both protocols: the functors
// (kernels/primitives/functor_of.cuh) and the scalar's two homes.
struct Reduction {
  const char* name;
  ncclDataType_t dtype;
  ReduceKind kind;
  bool scalarOnHost;
};
class KernelOnCpuReductions : public ::testing::TestWithParam<std::tuple<Reduction, const char*>> {};

// Rank r's element i: even small integers, so every result below is exact.
float reductionInput(int rank, size_t i) { return static_cast<float>((i % 13) * 4 + static_cast<size_t>(rank) * 2); }

float reductionResult(const Reduction& red, int nranks, size_t i, float scalar) {
  float acc = 0;
  for (int r = 0; r < nranks; ++r) {
    const float v = reductionInput(r, i);
    if (red.kind == ReduceKind::Max)
      acc = r == 0 ? v : std::max(acc, v);
    else
      acc += red.kind == ReduceKind::PreMulSum ? v * scalar : v;
  }
  return red.kind == ReduceKind::SumPostDiv ? acc / static_cast<float>(nranks) : acc;
}

template <typename T>
void runReduction(RankCtx& ctx, SimRank& sim, const Reduction& red) {
  constexpr size_t kCount = 9001;
  const float scalarValue = 0.5f;
  const T scalar = fromFloat<T>(scalarValue);
  std::vector<T> in(kCount), out(kCount, fromFloat<T>(-1));
  for (size_t i = 0; i < kCount; ++i) in[i] = fromFloat<T>(reductionInput(ctx.rank, i));
  ReduceSpec spec{red.dtype, red.kind, red.kind == ReduceKind::PreMulSum ? &scalar : nullptr, ctx.nranks};
  spec.scalarOnHost = red.scalarOnHost;
  Plan plan;
  plan.comm = ctx.comm;
  plan.tasks.push_back(simTask(ctx, CollType::AllReduce, red.dtype, spec, in.data(), out.data(), kCount));
  SimOutcome o;
  if (!sim.runKernels(plan, &o)) return;
  std::vector<float> want(kCount);
  for (size_t i = 0; i < kCount; ++i) want[i] = reductionResult(red, ctx.nranks, i, scalarValue);
  expectExact(ctx, o, out, want, red.name);
}

TEST_P(KernelOnCpuReductions, ResultsAreExact) {
  const auto [red, proto] = GetParam();
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", proto}};
  std::barrier ready(3);
  runThreads(
      3,
      [&, red = red](RankCtx& ctx) {
        SimRank sim(ctx, ready);
        if (red.dtype == ncclBfloat16)
          runReduction<bf16_t>(ctx, sim, red);
        else if (red.dtype == ncclInt32)
          runReduction<int32_t>(ctx, sim, red);
        else
          runReduction<float>(ctx, sim, red);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(
    KindsAndTypes, KernelOnCpuReductions,
    ::testing::Combine(::testing::Values(Reduction{"max", ncclFloat32, ReduceKind::Max, false},
                                         Reduction{"premulsum_host_scalar", ncclFloat32, ReduceKind::PreMulSum, true},
                                         Reduction{"premulsum_device_scalar", ncclFloat32, ReduceKind::PreMulSum,
                                                   false},
                                         Reduction{"avg", ncclFloat32, ReduceKind::SumPostDiv, false},
                                         Reduction{"bf16_sum", ncclBfloat16, ReduceKind::Sum, false},
                                         Reduction{"int32_sum", ncclInt32, ReduceKind::Sum, false}),
                       ::testing::Values("Simple", "LL")),
    [](const auto& info) { return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace chorus
