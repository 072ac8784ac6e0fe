// Deterministic AllReduce across hosts that hold consecutive ranks: the chain
// of plan_wire_chain.cc. Results bit-exact against the rank-order
// combination computed in the test (so bit-identical to the flat form's),
// and plans whose cross-host connections follow the chain.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/rank_runner.h"
#include "core/comm.h"
#include "plan/dry_connectors.h"
#include "plan/plan_builder.h"
#include "wire/wire_cases.h"
#include "wire/wire_plans.h"

namespace chorus::test {
namespace {

RunOptions deterministicEnv() {
  RunOptions o;
  o.env = {{"CHORUS_DETERMINISTIC", "1"}};
  o.timeoutMs = 240000;
  return o;
}

using HostsParam = std::tuple<int, int>;  // ranks, hosts
class DeterministicChain : public ::testing::TestWithParam<HostsParam> {};

TEST_P(DeterministicChain, EveryTypeAndOpExact) {
  const auto [nranks, hosts] = GetParam();
  auto graph = hostsGraph(nranks, hosts, false);
  ASSERT_TRUE(graph && graph->nhosts == hosts && graph->ranksPerHost == nranks / hosts);
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        ctx.comm->graph = graph;  // before the first operation builds a plan
        for (DetCall call : {DetCall::AllReduceEx, DetCall::AllReduce})
          for (ncclDataType_t t : detTypes())
            for (DetOp op : kDetOps)
              for (size_t count : {size_t(1), size_t(1001)})
                for (bool inPlace : {false, true})
                  if (!runDetCase(ctx, ctx.comm, DetCase{call, t, op, count, inPlace})) return;
        // Many pieces per shard and an uneven last block; the types whose
        // partials are wider than their values, and the 8-byte ones.
        for (ncclDataType_t t : {ncclFloat16, ncclFloat32, ncclFloat64, ncclInt8, ncclUint64})
          for (DetOp op : {DetOp::Sum, DetOp::Avg, DetOp::PreMul})
            if (!runDetCase(ctx, ctx.comm, DetCase{DetCall::AllReduceEx, t, op, 300001, op == DetOp::Avg})) return;
        // The other calls keep the flat form on the same communicator.
        for (DetCall call : {DetCall::ReduceScatterEx, DetCall::Reduce})
          if (!runDetCase(ctx, ctx.comm, DetCase{call, ncclBfloat16, DetOp::Sum, 517, false})) return;
      },
      deterministicEnv());
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeterministicChain,
                         ::testing::Values(HostsParam{4, 2}, HostsParam{6, 3}, HostsParam{8, 4}, HostsParam{6, 2},
                                           HostsParam{9, 3}),
                         [](const ::testing::TestParamInfo<HostsParam>& i) {
                           return std::to_string(std::get<0>(i.param)) + "ranks" +
                                  std::to_string(std::get<1>(i.param)) + "hosts";
                         });

// The segments and cross-host peers of one rank's plan of a deterministic
// float AllReduce, built against connectors that only record their keys.
struct PlanShape {
  int chains = 0, owners = 0, relays = 0;
  std::vector<int> crossPeers;  // ranks on other hosts this rank has a connector with
};

PlanShape planShape(const graph::CommGraph& graph, int rank, bool wireHosts) {
  CommConfig config;
  config.wireHosts = wireHosts;
  DryConnectors dry;
  Plan plan;
  Task t = floatSumTask(size_t(1) << 16);
  t.wire.deterministic = 1;
  plan.tasks.push_back(t);
  PlanShape shape;
  PlanBuilder builder(PlanContext{rank, graph.nranks, &config, &graph, nullptr, &dry}, &plan);
  EXPECT_EQ(builder.build(), ncclSuccess);
  for (const ConnRef& c : plan.conns) {
    const DryConnectors::Info* info = dry.info(c.recv ? static_cast<const void*>(c.recv) : c.send);
    if (info == nullptr) {
      ADD_FAILURE() << "rank " << rank << ": a connector without a key";
      continue;
    }
    if (graph.hostOfRank[info->key.peer] != graph.hostOfRank[rank]) shape.crossPeers.push_back(info->key.peer);
  }
  for (const Lane& lane : plan.lanes)
    for (const sched::Segment& seg : lane.segments) {
      shape.chains += seg.kind == sched::SegmentKind::WireChain;
      shape.owners += seg.kind == sched::SegmentKind::WireOwner;
      shape.relays += seg.kind == sched::SegmentKind::WireRelay;
    }
  return shape;
}

// Across hosts, rank (h, p) talks only to position p of the hosts next to it
// in the chain (the owner on the last host also to host 0, which relays the
// result on): two connectors per host boundary crossed, one shard's worth
// each, against the flat form's connectors to every rank of the other hosts.
TEST(DeterministicChainPlan, CrossHostLinksFollowTheChain) {
  const int nranks = 8, hosts = 4, G = 2;
  auto graph = hostsGraph(nranks, hosts, false);
  ASSERT_TRUE(graph && graph->ranksPerHost == G);
  for (int rank = 0; rank < nranks; ++rank) {
    const int h = rank / G, p = rank % G;
    const PlanShape shape = planShape(*graph, rank, true);
    EXPECT_EQ(shape.chains, h < hosts - 1 ? 1 : 0) << "rank " << rank;
    EXPECT_EQ(shape.owners, h == hosts - 1 ? 1 : 0) << "rank " << rank;
    EXPECT_EQ(shape.relays, h < hosts - 1 ? 1 : 0) << "rank " << rank;
    auto at = [&](int host) { return host * G + p; };
    std::vector<int> expected;
    if (h > 0) expected.push_back(at(h - 1));                                   // the previous link's partial
    if (h < hosts - 1) expected.push_back(at(h + 1));                           // the partial on
    if (h == hosts - 1) expected.push_back(at(0));                              // the owner's result to host 0's relay
    if (h < hosts - 1) expected.push_back(h == 0 ? at(hosts - 1) : at(h - 1));  // the relay's input
    if (h < hosts - 2) expected.push_back(at(h + 1));                           // the relay's output
    std::sort(expected.begin(), expected.end());
    std::vector<int> got = shape.crossPeers;
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "rank " << rank;
  }
}

// Hosts that do not hold consecutive ranks, and CHORUS_WIRE_HOSTS=0, keep
// the flat form: no chain, and connectors to every rank of the other hosts.
TEST(DeterministicChainPlan, FlatFormOtherwise) {
  const int nranks = 8, hosts = 4, G = 2;
  auto roundRobin = hostsGraph(nranks, hosts, true);
  auto consecutive = hostsGraph(nranks, hosts, false);
  ASSERT_TRUE(roundRobin && consecutive);
  for (int rank = 0; rank < nranks; ++rank)
    for (const auto& [graph, wireHosts] : {std::pair{roundRobin, true}, std::pair{consecutive, false}}) {
      const PlanShape shape = planShape(*graph, rank, wireHosts);
      EXPECT_EQ(shape.chains, 0) << "rank " << rank;
      EXPECT_EQ(shape.relays, 0) << "rank " << rank;
      // Contributions out and in, results out and in, with every remote rank.
      EXPECT_EQ(static_cast<int>(shape.crossPeers.size()), 4 * (nranks - G)) << "rank " << rank;
    }
}

}  // namespace
}  // namespace chorus::test
