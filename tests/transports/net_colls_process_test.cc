// Every collective across "hosts": forked ranks with their own NCCL_HOSTID
// talk through the net transport (socket backend over loopback). With two
// ranks per host, ranks on one host use shm and the hosts are joined by the
// network, so both transports serve one communicator.
#include <gtest/gtest.h>

#include <unistd.h>

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/coll_cases.h"
#include "common/rank_runner.h"
#include "core/comm.h"
#include "core/comm_config.h"
#include "net_test_util.h"

namespace chorus::test {
namespace {

struct Layout {
  int nranks;
  int ranksPerHost;
};

// helpers: the socket backend's helper threads move large messages on data
// streams (pieces are copied into slots); without them (the default on
// ordinary NICs) pieces in the application's buffers are sent from there
// (FifoEnd::sendsUserMemory).
using NetParam = std::tuple<Coll, Layout, bool>;
class NetCollectives : public ::testing::TestWithParam<NetParam> {};

TEST_P(NetCollectives, ResultsAreExact) {
  const auto [coll, layout, helpers] = GetParam();
  Selection sel;
  sel.types = {ncclFloat32};
  sel.ops = {OpKind::Sum, OpKind::Max};
  sel.counts = {0, 1, 1001, countForBytes(coll, ncclFloat32, layout.nranks, 600 * 1024) + 3};
  sel.inPlace = {false, true};
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"NCCL_SOCKET_IFNAME", "lo"},
              {"NCCL_NSOCKS_PERTHREAD", helpers ? "2" : "1"},
              {"NCCL_SOCKET_NTHREADS", helpers ? "2" : "0"},
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
         std::to_string(l.ranksPerHost) + "perhost" + (std::get<2>(info.param) ? "" : "_fromUserMemory");
}

INSTANTIATE_TEST_SUITE_P(AllColls, NetCollectives,
                         ::testing::Combine(::testing::ValuesIn(allColls()),
                                            ::testing::Values(Layout{2, 1}, Layout{4, 1}, Layout{4, 2}),
                                            ::testing::Bool()),
                         paramName);

// Float sum AllReduces of `counts` on `nranks` forked ranks, `perHost` to a
// host id, with `env`; `check` looks at each rank's communicator first.
void runHostAllReduces(int nranks, int perHost, std::vector<std::pair<std::string, std::string>> env,
                       std::vector<size_t> counts, const std::function<void(RankCtx&, ncclComm_t)>& check) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = std::move(env);
  opts.env.push_back({"NCCL_SOCKET_IFNAME", "lo"});
  opts.env.push_back({"CHORUS_TIMEOUT_MS", "15000"});
  Selection sel;
  sel.types = {ncclFloat32};
  sel.ops = {OpKind::Sum};
  sel.counts = std::move(counts);
  sel.inPlace = {false};
  runProcesses(
      nranks,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!initOnHost(ctx, perHost, &comm)) return;
        check(ctx, comm);
        ctx.comm = comm;
        runSelection(ctx, Coll::AllReduce, sel);
        ctx.comm = nullptr;
        RANK_OK(ctx, ncclCommFinalize(comm));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

// The shm + net mix, with NCCL_SHM_DISABLE=1 on one host: same-host ranks in
// different processes then also go through the network.
TEST(NetTransportProcesses, SameHostWithShmDisabledUsesTheNetwork) {
  runHostAllReduces(3, 3, {{"NCCL_SHM_DISABLE", "1"}}, {1, 100000}, [](RankCtx&, ncclComm_t) {});
}

// Hosts that are NCCL_HOSTIDs of one machine keep their own shm and network
// paths, but their ranks compete for the same CPUs: the spin rule counts
// them together (4 ranks here, over 2 "hosts"), and results stay exact.
TEST(NetTransportProcesses, HostsOfOneMachineShareTheSpinRule) {
  runHostAllReduces(4, 2, {{"CHORUS_SPIN_COUNT", ""}}, {1, 5000}, [](RankCtx& ctx, ncclComm_t comm) {
    if (comm->id.localNRanks != 2 || comm->id.machineNRanks != 4)
      ctx.fail("rank %d: %d ranks on its host and %d on its machine, want 2 and 4", ctx.rank, comm->id.localNRanks,
               comm->id.machineNRanks);
    const int64_t want = autoSpinCount(4, sysconf(_SC_NPROCESSORS_ONLN));
    if (comm->config.spinCount != want)
      ctx.fail("rank %d: spin count %lld, want %lld", ctx.rank, (long long)comm->config.spinCount, (long long)want);
  });
}

// One rank per host: every connector is a network link, so collective
// slots widen (CommConfig::collSlotBytes) on every rank alike, while
// point-to-point ones keep the base size; two ranks on a host keep the base
// size for both. Results stay exact across several wide pieces.
TEST(NetTransportProcesses, CollectiveSlotsWidenWhereEveryHostHoldsOneRank) {
  for (const auto& [nranks, perHost] : {std::pair{2, 1}, std::pair{4, 2}}) {
    const uint32_t want = perHost == 1 ? kAcrossHostsSlotBytes : kBaseSlotBytes;
    runHostAllReduces(nranks, perHost, {{"CHORUS_SLOT_BYTES", ""}, {"NCCL_BUFFSIZE", ""}}, {1, 3 * want / 4 + 7},
                      [want](RankCtx& ctx, ncclComm_t comm) {
                        if (comm->config.collSlotBytes != want || comm->config.slotBytes != kBaseSlotBytes)
                          ctx.fail("rank %d: slots of %u (collectives) and %u (point-to-point), want %u and %u",
                                   ctx.rank, comm->config.collSlotBytes, comm->config.slotBytes, want, kBaseSlotBytes);
                      });
  }
}

}  // namespace
}  // namespace chorus::test
