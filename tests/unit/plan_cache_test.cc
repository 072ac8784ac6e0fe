// The plan cache answers a repeated group from the plan it built the first
// time: the plan builder must never change the tasks it keeps as the cache
// key (it once rewrote a self-copy's datatype to bytes, so a grouped float
// send/recv to self missed the cache and was rebuilt on every call).
#include <gtest/gtest.h>

#include <vector>

#include "common/rank_runner.h"
#include "core/comm.h"
#include "plan/plan_cache.h"

namespace chorus {
namespace {

using namespace chorus::test;

TEST(PlanCache, RepeatedGroupedSendRecvHitsTheCache) {
  runThreads(2, [](RankCtx& ctx) {
    const int peer = 1 - ctx.rank;
    const size_t n = 1000;
    std::vector<float> in(n), self(n), fromPeer(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(ctx.rank * 10000 + i) + 0.25f;
    const uint64_t builds0 = ctx.comm->planCache->builds(), hits0 = ctx.comm->planCache->hits();
    for (int round = 0; round < 3; ++round) {
      RANK_OK(ctx, ncclGroupStart());
      RANK_OK(ctx, ncclSend(in.data(), n, ncclFloat32, ctx.rank, ctx.comm, nullptr));
      RANK_OK(ctx, ncclRecv(self.data(), n, ncclFloat32, ctx.rank, ctx.comm, nullptr));
      RANK_OK(ctx, ncclSend(in.data(), n, ncclFloat32, peer, ctx.comm, nullptr));
      RANK_OK(ctx, ncclRecv(fromPeer.data(), n, ncclFloat32, peer, ctx.comm, nullptr));
      RANK_OK(ctx, ncclGroupEnd());
      for (size_t i = 0; i < n; ++i) {
        if (self[i] != in[i] || fromPeer[i] != static_cast<float>(peer * 10000 + i) + 0.25f) {
          ctx.fail("rank %d round %d: wrong data at %zu", ctx.rank, round, i);
          return;
        }
      }
    }
    const uint64_t builds = ctx.comm->planCache->builds() - builds0, hits = ctx.comm->planCache->hits() - hits0;
    if (builds != 1 || hits != 2)
      ctx.fail("rank %d: the same group 3 times built %llu plans and hit the cache %llu times (want 1 and 2)", ctx.rank,
               static_cast<unsigned long long>(builds), static_cast<unsigned long long>(hits));
  });
}

// PyTorch's PreMulSum pattern: an operator made for the call and destroyed
// after it, with the same factor every step. Every step after the first
// finds the plan in the cache, and the results are right each time.
TEST(PlanCache, APreMulSumMadeAgainWithTheSameFactorHitsTheCache) {
  runThreads(2, [](RankCtx& ctx) {
    const size_t n = 1000;
    std::vector<float> in(n), out(n);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i % 7 + ctx.rank);
    const uint64_t builds0 = ctx.comm->planCache->builds(), hits0 = ctx.comm->planCache->hits();
    for (int step = 0; step < 4; ++step) {
      const float factor = 0.5f;
      ncclRedOp_t op{};
      RANK_OK(ctx, ncclRedOpCreatePreMulSum(&op, const_cast<float*>(&factor), ncclFloat32, ncclScalarHostImmediate,
                                            ctx.comm));
      RANK_OK(ctx, ncclAllReduce(in.data(), out.data(), n, ncclFloat32, op, ctx.comm, nullptr));
      RANK_OK(ctx, ncclRedOpDestroy(op, ctx.comm));
      for (size_t i = 0; i < n; ++i) {
        const float want = 0.5f * static_cast<float>(i % 7) + 0.5f * static_cast<float>(i % 7 + 1);
        if (out[i] != want) {
          ctx.fail("rank %d step %d: [%zu] = %g, want %g", ctx.rank, step, i, out[i], want);
          return;
        }
      }
    }
    const uint64_t builds = ctx.comm->planCache->builds() - builds0, hits = ctx.comm->planCache->hits() - hits0;
    if (builds != 1 || hits != 3)
      ctx.fail("rank %d: 4 steps built %llu plans and hit the cache %llu times (want 1 and 3)", ctx.rank,
               static_cast<unsigned long long>(builds), static_cast<unsigned long long>(hits));
  });
}

}  // namespace
}  // namespace chorus
