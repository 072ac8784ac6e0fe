// Every collective across "hosts": forked ranks with their own NCCL_HOSTID
// talk through the net transport (socket backend over loopback). With two
// ranks per host, ranks on one host use shm and the hosts are joined by the
// network, so both transports serve one communicator.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "common/coll_cases.h"
#include "common/rank_runner.h"
#include "net_test_util.h"

namespace chorus::test {
namespace {

struct Layout {
  int nranks;
  int ranksPerHost;
};

using NetParam = std::tuple<Coll, Layout>;
class NetCollectives : public ::testing::TestWithParam<NetParam> {};

TEST_P(NetCollectives, ResultsAreExact) {
  const auto [coll, layout] = GetParam();
  Selection sel;
  sel.types = {ncclFloat32};
  sel.ops = {OpKind::Sum, OpKind::Max};
  sel.counts = {0, 1, 1001, countForBytes(coll, ncclFloat32, layout.nranks, 600 * 1024) + 3};
  sel.inPlace = {false, true};
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"NCCL_SOCKET_IFNAME", "lo"},
              {"NCCL_NSOCKS_PERTHREAD", "2"},
              {"NCCL_SOCKET_NTHREADS", "2"},
              {"CHORUS_TIMEOUT_MS", "15000"}};
  const int perHost = layout.ranksPerHost;
  runProcesses(
      layout.nranks,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!initOnHost(ctx, perHost, &comm)) return;
        ctx.comm = comm;
        runSelection(ctx, coll, sel);
        ctx.comm = nullptr;
        RANK_OK(ctx, ncclCommFinalize(comm));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

std::string paramName(const ::testing::TestParamInfo<NetParam>& info) {
  const Layout l = std::get<1>(info.param);
  return std::string(collName(std::get<0>(info.param))) + "_" + std::to_string(l.nranks / l.ranksPerHost) + "hosts_" +
         std::to_string(l.ranksPerHost) + "perhost";
}

INSTANTIATE_TEST_SUITE_P(AllColls, NetCollectives,
                         ::testing::Combine(::testing::ValuesIn(allColls()),
                                            ::testing::Values(Layout{2, 1}, Layout{4, 1}, Layout{4, 2})),
                         paramName);

// The shm + net mix, with NCCL_SHM_DISABLE=1 on one host: same-host ranks in
// different processes then also go through the network.
TEST(NetTransportProcesses, SameHostWithShmDisabledUsesTheNetwork) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_SHM_DISABLE", "1"}, {"CHORUS_TIMEOUT_MS", "15000"}};
  Selection sel;
  sel.types = {ncclFloat32};
  sel.ops = {OpKind::Sum};
  sel.counts = {1, 100000};
  sel.inPlace = {false};
  runProcesses(
      3,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!initOnHost(ctx, 3, &comm)) return;
        ctx.comm = comm;
        runSelection(ctx, Coll::AllReduce, sel);
        ctx.comm = nullptr;
        RANK_OK(ctx, ncclCommFinalize(comm));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

}  // namespace
}  // namespace chorus::test
