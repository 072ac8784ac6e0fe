// End to end through the network transport with the UCX backend: two forked
// processes with different NCCL_HOSTID values (so they cannot use shared
// memory) and NCCL_NET=UCX run all-reduces over loopback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "nccl.h"

namespace chorus::test {
namespace {

#ifdef CHORUS_HAVE_UCX

bool allReduceIsExact(RankCtx& ctx, ncclComm_t comm, size_t count) {
  std::vector<float> send(count), recv(count, -1.0f);
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(ctx.rank + 1 + static_cast<int>(i % 7));
  if (!RANK_OK(ctx, ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr))) return false;
  const float rankSum = static_cast<float>(ctx.nranks * (ctx.nranks + 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    float expected = rankSum + static_cast<float>(ctx.nranks * static_cast<int>(i % 7));
    if (recv[i] != expected) {
      ctx.fail("rank %d: count %zu: element %zu is %g, expected %g", ctx.rank, count, i, recv[i], expected);
      return false;
    }
  }
  return true;
}

TEST(UcxNetTransport, AllReduceBetweenTwoHosts) {
  useHostMode();
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"NCCL_NET", "UCX"}, {"NCCL_SOCKET_IFNAME", "lo"}, {"CHORUS_TIMEOUT_MS", "15000"}};
  runProcesses(
      2,
      [&](RankCtx& ctx) {
        std::string host = "ucx-test-host-" + std::to_string(ctx.rank);
        setenv("NCCL_HOSTID", host.c_str(), 1);
        ncclComm_t comm = nullptr;
        if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
        for (size_t count : {size_t{1}, size_t{1000}, size_t{(1 << 20) + 3}})
          if (!allReduceIsExact(ctx, comm, count)) break;
        RANK_OK(ctx, ncclCommFinalize(comm));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

#endif  // CHORUS_HAVE_UCX

}  // namespace
}  // namespace chorus::test
