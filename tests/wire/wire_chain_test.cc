// Deterministic reductions across hosts that hold consecutive ranks: the
// chains of plan_wire_chain.cc (AllReduce) and plan_wire_chain_rs.cc
// (ReduceScatter, Reduce). Results bit-exact against the rank-order
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
#include "plan/wire_chain_routes.h"
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

// Runs `body` on every rank of the parameter's layout (hosts of
// consecutive ranks), in deterministic mode.
template <class Body>
void onHosts(const HostsParam& layout, Body body) {
  const auto [nranks, hosts] = layout;
  auto graph = hostsGraph(nranks, hosts, false);
  ASSERT_TRUE(graph && graph->nhosts == hosts && graph->ranksPerHost == nranks / hosts);
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        ctx.comm->graph = graph;  // before the first operation builds a plan
        body(ctx);
      },
      deterministicEnv());
}

TEST_P(DeterministicChain, EveryTypeAndOpExact) {
  onHosts(GetParam(), [](RankCtx& ctx) {
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
  });
}

// ReduceScatter and Reduce take their own chain (plan_wire_chain_rs.cc):
// shards owned on the last host and on the others (finished there), Reduce
// with its root on the first, a middle and the last host.
TEST_P(DeterministicChain, ReduceScatterAndReduceExact) {
  onHosts(GetParam(), [](RankCtx& ctx) {
    const int nranks = ctx.nranks;
    for (DetCall call : {DetCall::ReduceScatterEx, DetCall::ReduceScatter})
      for (ncclDataType_t t : detTypes())
        for (DetOp op : kDetOps)
          for (size_t count : {size_t(1), size_t(1001)})
            for (bool inPlace : {false, true})
              if (!runDetCase(ctx, ctx.comm, DetCase{call, t, op, count, inPlace})) return;
    for (int root : {0, nranks / 2, nranks - 1})
      for (ncclDataType_t t : detTypes())
        for (DetOp op : kDetOps)
          if (!runDetCase(ctx, ctx.comm, DetCase{DetCall::Reduce, t, op, 1001, root == 0, root})) return;
    // Many pieces per shard and an uneven last block.
    for (ncclDataType_t t : {ncclFloat16, ncclFloat32, ncclFloat64, ncclInt8})
      for (DetOp op : {DetOp::Sum, DetOp::Avg, DetOp::PreMul}) {
        if (!runDetCase(ctx, ctx.comm, DetCase{DetCall::ReduceScatterEx, t, op, 70001, op == DetOp::Avg})) return;
        if (!runDetCase(ctx, ctx.comm, DetCase{DetCall::Reduce, t, op, 300001, false, 0})) return;
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeterministicChain,
                         ::testing::Values(HostsParam{4, 2}, HostsParam{6, 3}, HostsParam{8, 4}, HostsParam{6, 2},
                                           HostsParam{9, 3}),
                         [](const ::testing::TestParamInfo<HostsParam>& i) {
                           return std::to_string(std::get<0>(i.param)) + "ranks" +
                                  std::to_string(std::get<1>(i.param)) + "hosts";
                         });

// The segments and cross-host peers of one rank's plan of a deterministic
// float AllReduce of kPlanCount elements, built against connectors that only
// record their keys, and the bytes the plan sends to every other host.
constexpr size_t kPlanCount = size_t(1) << 16;

struct PlanShape {
  int chains = 0, owners = 0, relays = 0;
  std::vector<int> crossPeers;     // ranks on other hosts this rank has a connector with
  std::vector<uint64_t> bytesOut;  // per host: bytes this rank's segments send there
};

int peerOf(const DryConnectors& dry, const Plan& plan, int16_t id) {
  const ConnRef& c = plan.conns[static_cast<size_t>(id)];
  const DryConnectors::Info* info = dry.info(c.recv ? static_cast<const void*>(c.recv) : c.send);
  return info ? info->key.peer : -1;
}

// The peers a segment sends to: conn[1], or a combination's / relay's table of outputs.
std::vector<int> sendPeers(const DryConnectors& dry, const Plan& plan, const sched::Segment& seg) {
  std::vector<int> peers;
  const bool tabled = seg.kind == sched::SegmentKind::WireOwner || seg.kind == sched::SegmentKind::WireRelay ||
                      seg.kind == sched::SegmentKind::WireChain;
  if (!tabled) {
    if (seg.kind != sched::SegmentKind::WireGather && seg.conn[1] != sched::kNoConn)
      peers.push_back(peerOf(dry, plan, seg.conn[1]));
    return peers;
  }
  const int32_t* outs = plan.rankTable.data() + seg.ringTable + seg.nranks;
  for (int r = 0; r < seg.nranks; ++r)
    if (outs[r] != sched::kNoConn) peers.push_back(peerOf(dry, plan, static_cast<int16_t>(outs[r])));
  return peers;
}

// A deterministic float sum of kPlanCount elements: AllReduce by default;
// ReduceScatter with kPlanCount / nranks per rank; Reduce to `root`.
Task deterministicTask(CollType type = CollType::AllReduce, int nranks = 1, int root = -1) {
  Task t = floatSumTask(kPlanCount);
  t.type = type;
  if (type == CollType::ReduceScatter) t.count = kPlanCount / static_cast<size_t>(nranks);
  t.root = root;
  t.wire.deterministic = 1;
  return t;
}

PlanShape planShape(const graph::CommGraph& graph, int rank, bool wireHosts, const Task& t = deterministicTask()) {
  CommConfig config;
  config.wireHosts = wireHosts;
  DryConnectors dry;
  Plan plan;
  plan.tasks.push_back(t);
  PlanShape shape;
  shape.bytesOut.assign(static_cast<size_t>(graph.nhosts), 0);
  PlanBuilder builder(PlanContext{rank, graph.nranks, &config, &graph, nullptr, &dry}, &plan);
  EXPECT_EQ(builder.build(), ncclSuccess);
  for (size_t i = 0; i < plan.conns.size(); ++i) {
    const int peer = peerOf(dry, plan, static_cast<int16_t>(i));
    EXPECT_GE(peer, 0) << "rank " << rank << ": a connector without a key";
    if (peer >= 0 && graph.hostOfRank[peer] != graph.hostOfRank[rank]) shape.crossPeers.push_back(peer);
  }
  for (const Lane& lane : plan.lanes)
    for (const sched::Segment& seg : lane.segments) {
      shape.chains += seg.kind == sched::SegmentKind::WireChain;
      shape.owners += seg.kind == sched::SegmentKind::WireOwner;
      shape.relays += seg.kind == sched::SegmentKind::WireRelay;
      for (int peer : sendPeers(dry, plan, seg))
        if (peer >= 0 && graph.hostOfRank[peer] != graph.hostOfRank[rank])
          shape.bytesOut[static_cast<size_t>(graph.hostOfRank[peer])] += seg.count * sizeof(float);
    }
  return shape;
}

// What every host's link carries per direction, from the plans of all ranks,
// in units of the buffer's bytes.
double busiestLink(const graph::CommGraph& graph, bool wireHosts, const Task& t = deterministicTask()) {
  std::vector<double> out(static_cast<size_t>(graph.nhosts), 0), in(out.size(), 0);
  for (int rank = 0; rank < graph.nranks; ++rank) {
    const PlanShape shape = planShape(graph, rank, wireHosts, t);
    for (int h = 0; h < graph.nhosts; ++h) {
      const double units = double(shape.bytesOut[static_cast<size_t>(h)]) / double(t.count * sizeof(float));
      out[static_cast<size_t>(graph.hostOfRank[rank])] += units;
      in[static_cast<size_t>(h)] += units;
    }
  }
  return std::max(*std::max_element(in.begin(), in.end()), *std::max_element(out.begin(), out.end()));
}

// At 4 hosts x 2 ranks the flat form puts 3x the buffer on the busiest link
// direction and a ring 1.5x; the chain with every host its own link 2x, and
// the mix of routes the planner picks 5/3 (up to whole blocks per share).
TEST(DeterministicChainPlan, BusiestLinkCarriesFiveThirdsOfTheBuffer) {
  auto graph = hostsGraph(8, 4, false);
  ASSERT_TRUE(graph && graph->ranksPerHost == 2);
  EXPECT_NEAR(busiestLink(*graph, false), 3.0, 0.01);
  EXPECT_NEAR(busiestLink(*graph, true), 5.0 / 3.0, 0.02);
  // Two hosts: one route, the partial one way and the result the other, as a ring.
  auto two = hostsGraph(4, 2, false);
  EXPECT_NEAR(busiestLink(*two, true), 1.0, 0.01);
  for (int rank = 0; rank < 4; ++rank) {
    const PlanShape shape = planShape(*two, rank, true);
    EXPECT_EQ(shape.chains, rank / 2 == 0 ? 1 : 0) << "rank " << rank;
    EXPECT_EQ(shape.owners, rank / 2 == 1 ? 1 : 0) << "rank " << rank;
    for (int peer : shape.crossPeers) EXPECT_EQ(peer % 2, rank % 2) << "rank " << rank;  // same local position
  }
}

// ReduceScatter (in units of one rank's output block) and Reduce (of the
// buffer) at 4 hosts x 2 ranks: the flat form puts 12 and 6 on the busiest
// link direction; the chain 10 (a middle host takes every shard's partial
// and its own ranks' finished partials) and 1 (2 for a root on a middle
// host). Chain links sit at the shard's local position.
TEST(DeterministicChainPlan, ReduceScatterAndReduceFollowTheChain) {
  const int nranks = 8;
  auto graph = hostsGraph(nranks, 4, false);
  ASSERT_TRUE(graph && graph->ranksPerHost == 2);
  const Task rs = deterministicTask(CollType::ReduceScatter, nranks);
  EXPECT_NEAR(busiestLink(*graph, false, rs), 12.0, 0.01);
  EXPECT_NEAR(busiestLink(*graph, true, rs), 10.0, 0.01);
  for (int root : {0, 3, 7}) {
    const Task reduce = deterministicTask(CollType::Reduce, nranks, root);
    EXPECT_NEAR(busiestLink(*graph, false, reduce), 6.0, 0.01) << "root " << root;
    // A root on a middle host takes the previous host's partial and the last host's.
    const double chain = root / 2 == 0 || root / 2 == 3 ? 1.0 : 2.0;
    EXPECT_NEAR(busiestLink(*graph, true, reduce), chain, 0.01) << "root " << root;
    for (int rank = 0; rank < nranks; ++rank) {
      const PlanShape shape = planShape(*graph, rank, true, reduce);
      const bool link = rank % 2 == root % 2;
      EXPECT_EQ(shape.chains, link && !(rank == root && rank / 2 == 3) ? 1 : 0) << "rank " << rank << " root " << root;
      EXPECT_EQ(shape.owners, rank == root ? 1 : 0) << "rank " << rank << " root " << root;
      for (int peer : shape.crossPeers) EXPECT_EQ(peer % 2, root % 2) << "rank " << rank << " root " << root;
    }
  }
}

// For every layout the mix is a set of valid routes taking all of each shard,
// and its busiest link carries no more than the chain with every host its
// own link (the route model of wire_chain_routes.h; half values with fp32
// partials too).
TEST(DeterministicChainRoutes, ValidAndNeverWorseThanThePlainChain) {
  for (int H = 2; H <= 8; ++H)
    for (int G = 2; G <= 4; ++G)
      for (const wirechain::ElemBytes bytes : {wirechain::ElemBytes{4, 4, 4}, wirechain::ElemBytes{2, 4, 2}}) {
        const auto mix = wirechain::chooseRoutes(H, G, bytes);
        int twelfths = 0;
        std::vector<double> in(static_cast<size_t>(H), 0), out(in.size(), 0);
        for (const wirechain::Share& s : mix) {
          twelfths += s.twelfths;
          const wirechain::Route& r = s.route;
          ASSERT_EQ(r.absorb[H - 1], H - 1) << "the last host is the owner's link";
          EXPECT_EQ(r.parent[H - 1], -1);
          for (int h = 0; h < H; ++h) {
            EXPECT_EQ(r.absorb[r.absorb[h]], r.absorb[h]) << "host " << h << " absorbed by a non-link";
            int up = h, steps = 0;
            while (up != H - 1 && steps++ <= H) up = r.parent[up];
            EXPECT_EQ(up, H - 1) << "host " << h << " never gets the result (H " << H << ")";
          }
          for (int h = 0; h + 1 < H; ++h) EXPECT_LE(r.absorb[h], r.absorb[h + 1]) << "absorbed runs out of order";
          wirechain::routeLoads(r, G, bytes, s.twelfths / 12.0, &in, &out);
        }
        EXPECT_EQ(twelfths, 12);
        std::vector<double> plainIn(in.size(), 0), plainOut(in.size(), 0);
        wirechain::Route plain;
        for (int h = 0; h < H; ++h) {
          plain.absorb.push_back(h);
          plain.parent.push_back(h == H - 1 ? -1 : h == 0 ? H - 1 : h - 1);
        }
        wirechain::routeLoads(plain, G, bytes, 1.0, &plainIn, &plainOut);
        const double mixed =
            std::max(*std::max_element(in.begin(), in.end()), *std::max_element(out.begin(), out.end()));
        const double chain = std::max(*std::max_element(plainIn.begin(), plainIn.end()),
                                      *std::max_element(plainOut.begin(), plainOut.end()));
        EXPECT_LE(mixed, chain + 1e-9) << "H " << H << " G " << G;
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
