// Collectives over graphs whose rings are NOT in rank order: every rank's
// communicator gets a CommGraph that claims the ranks sit on several hosts,
// placed round-robin (rank r on host r % H), so ring position p holds a rank
// other than p, trees are built over hosts with chains inside them, and the
// hierarchical AllReduce has real local and inter-host groups. Results must
// be exact for every collective under every forced algorithm and protocol.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/coll_cases.h"
#include "common/rank_runner.h"
#include "core/comm.h"
#include "graph/links.h"
#include "graph/search.h"
#include "graph/synthetic.h"
#include "plan/plan_builder.h"
#include "topo/comm_topology.h"
#include "transport/connection_table.h"

namespace chorus::test {
namespace {

enum class Layout { RoundRobin, Uneven, PcieScrambled };

// The topology every rank's graph is built from (identical on all ranks).
topo::CommTopology layoutTopology(Layout layout, int nranks, int hosts) {
  if (layout == Layout::PcieScrambled) {
    graph::SyntheticSpec s;
    s.shape = graph::SyntheticShape::Pcie;
    s.hosts = hosts;
    s.perHost = nranks / hosts;
    s.roundRobin = true;
    topo::CommTopology t = graph::syntheticCommTopology(s);
    // Alternate sockets within each host so the search reorders the ranks.
    const topo::CommTopology plain = t;
    for (int r = 0; r < nranks; ++r) {
      const int local = plain.ranks[r].localRank, per = s.perHost;
      const int swapped = (local % 2) * (per / 2) + local / 2;
      for (int q = 0; q < nranks; ++q)
        if (plain.ranks[q].host == plain.ranks[r].host && plain.ranks[q].localRank == swapped)
          t.ranks[r].device = plain.ranks[q].device;
    }
    return t;
  }
  std::vector<uint64_t> hashes;
  for (int r = 0; r < nranks; ++r) hashes.push_back(layout == Layout::Uneven ? (r % 3 == 2 ? 1 : 0) : r % hosts);
  return graph::hostsFromHashes(hashes);
}

std::shared_ptr<const graph::CommGraph> layoutGraph(Layout layout, int nranks, int hosts, int channels) {
  auto g = std::make_shared<graph::CommGraph>();
  graph::SearchOptions o;
  o.minChannels = channels;
  o.maxChannels = channels;
  EXPECT_EQ(graph::searchGraph(layoutTopology(layout, nranks, hosts), o, g.get()), ncclSuccess);
  return g;
}

using Param = std::tuple<const char*, const char*, int, int, Layout>;  // algo, proto, nranks, hosts, layout

class GraphColls : public ::testing::TestWithParam<Param> {};

TEST_P(GraphColls, ExactResults) {
  const auto [algo, proto, nranks, hosts, layout] = GetParam();
  const int channels = std::string(proto) == "LL" ? 1 : 2;
  auto graph = layoutGraph(layout, nranks, hosts, channels);
  ASSERT_TRUE(graph && graph->nranks == nranks);
  if (layout != Layout::Uneven) {
    bool rankOrder = true;
    for (int p = 0; p < nranks; ++p) rankOrder &= graph->rings[0].order[p] == p;
    ASSERT_FALSE(rankOrder) << "the layout must reorder the ring";
  }
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", algo},
              {"NCCL_PROTO", proto},
              {"NCCL_MIN_NCHANNELS", std::to_string(channels)},
              {"NCCL_MAX_NCHANNELS", std::to_string(channels)}};
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        ctx.comm->graph = graph;  // before the first operation builds a plan
        Selection sel;
        sel.types = {ncclFloat32, ncclInt32};
        sel.ops = {OpKind::Sum, OpKind::Avg, OpKind::PreMulDevice};
        sel.counts = {1, 1001, 40003};
        runSelection(ctx, Coll::AllReduce, sel);
        Selection big;
        big.types = {ncclFloat32};
        big.ops = {OpKind::Max};
        big.counts = {200003};
        runSelection(ctx, Coll::AllReduce, big);
        Selection other;
        other.types = {ncclFloat32};
        other.ops = {OpKind::Sum};
        other.counts = {1, 777, 30011};
        for (Coll c : {Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
          runSelection(ctx, c, other);
      },
      opts);
}

// The plan of a float sum `type` (AllReduce unless said) of `in` into `out`
// on this rank's communicator.
ncclResult_t buildFloatPlan(RankCtx& ctx, std::vector<float>& in, std::vector<float>& out, Plan* plan,
                            CollType type = CollType::AllReduce) {
  plan->comm = ctx.comm;
  Task t;
  t.type = type;
  t.comm = ctx.comm;
  t.sendbuff = in.data();
  t.recvbuff = out.data();
  t.count = in.size();
  t.dtype = ncclFloat32;
  t.spec = ReduceSpec{ncclFloat32, ReduceKind::Sum, nullptr, 1};
  plan->tasks.push_back(t);
  PlanBuilder builder(ctx.comm, plan);
  return builder.build();
}

// The direct plan over a power of two is recursive doubling: one lane of
// log2(n) pairwise exchanges with rank ^ 1, rank ^ 2, rank ^ 4, the later
// ones reading the previous result, only the last one dividing for avg.
TEST(GraphPlans, DirectPlanOfEightRanksIsRecursiveDoubling) {
  const int nranks = 8;
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", "Direct"}, {"NCCL_PROTO", "Simple"}};
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        std::vector<float> in(4096, 1.0f), out(4096, 0.0f);
        Plan plan;
        if (!RANK_OK(ctx, buildFloatPlan(ctx, in, out, &plan))) return;
        if (plan.lanes.size() != 1 || plan.lanes[0].segments.size() != 3) {
          ctx.fail("rank %d: %zu lanes (first with %zu segments), expected one lane of 3 exchanges", ctx.rank,
                   plan.lanes.size(), plan.lanes.empty() ? size_t(0) : plan.lanes[0].segments.size());
          return;
        }
        if (!RANK_OK(ctx, ctx.comm->conns->connectAll(waitBoundAfter(10000)))) return;
        for (int i = 0; i < 3; ++i) {
          const sched::Segment& seg = plan.lanes[0].segments[static_cast<size_t>(i)];
          const int peer = ctx.rank ^ (1 << i);
          const bool fromDst = (seg.flags & sched::kSegPairFromDst) != 0;
          const bool notLast = (seg.flags & sched::kSegPairNotLast) != 0;
          if (seg.kind != sched::SegmentKind::DirectPair || plan.conns[seg.conn[0]].end().peer != peer ||
              plan.conns[seg.conn[1]].end().peer != peer || fromDst != (i > 0) || notLast != (i < 2))
            ctx.fail("rank %d: exchange %d is %s with ranks %d/%d (fromDst %d, notLast %d), expected rank %d", ctx.rank,
                     i, sched::segmentKindName(seg.kind), plan.conns[seg.conn[0]].end().peer,
                     plan.conns[seg.conn[1]].end().peer, fromDst, notLast, peer);
        }
        Selection sel;  // and through the API, every op (avg divides once, PreMulSum scales once)
        sel.types = {ncclFloat32, ncclInt32};
        sel.ops = {OpKind::Sum, OpKind::Avg, OpKind::PreMulDevice, OpKind::Max};
        sel.counts = {1, 4096, 100003};
        runSelection(ctx, Coll::AllReduce, sel);
      },
      opts);
}

// The hier plan really is hierarchical: one lane per channel whose rounds
// are G local reduce-scatter steps, 2H-1 inter-host all-reduce steps and G
// local all-gather steps (11 for 2 hosts of 4), not the flat ring's 2n-1 (15).
TEST(GraphPlans, HierPlanHasThreePhases) {
  const int nranks = 8, hosts = 2, channels = 2;
  auto graph = layoutGraph(Layout::RoundRobin, nranks, hosts, channels);
  RunOptions opts;
  // Both channels, which a message this small would not get from the tuner across hosts.
  opts.env = {{"NCCL_ALGO", "Hier"}, {"NCCL_PROTO", "Simple"}, {"NCCL_MIN_NCHANNELS", "2"}};
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        ctx.comm->graph = graph;
        std::vector<float> in(4096, 1.0f), out(4096, 0.0f);
        Plan plan;
        if (!RANK_OK(ctx, buildFloatPlan(ctx, in, out, &plan))) return;
        const int G = nranks / hosts, H = hosts;
        // One round (4096 floats fit): G reduce-scatter steps, 2H-1 all-reduce steps, G all-gather steps.
        const size_t expectSteps = 2 * G + 2 * H - 1;
        if (plan.lanes.size() != static_cast<size_t>(channels))
          ctx.fail("rank %d: %zu lanes, expected %d", ctx.rank, plan.lanes.size(), channels);
        for (const Lane& lane : plan.lanes) {
          size_t steps = 0;
          for (const sched::Segment& seg : lane.segments) steps += sched::segmentSteps(seg);
          if (lane.segments.size() != 1 || lane.segments[0].kind != sched::SegmentKind::Hier || steps != expectSteps)
            ctx.fail("rank %d: %zu segments and %zu steps in a lane, expected one Hier segment of %zu", ctx.rank,
                     lane.segments.size(), steps, expectSteps);
        }
        // The inter-host steps talk to the same local position on the other host.
        const graph::HierLinks h = graph::hierLinks(*graph, 0, ctx.rank);
        if (graph->hostOfRank[h.interNext] == graph->hostOfRank[ctx.rank] ||
            h.localPos != graph::hierLinks(*graph, 0, h.interNext).localPos)
          ctx.fail("rank %d: inter-host peer %d is not the same position on another host", ctx.rank, h.interNext);
        RANK_OK(ctx, ctx.comm->conns->connectAll(waitBoundAfter(10000)));
        // And the collective itself, through the API.
        Selection sel;
        sel.types = {ncclFloat32};
        sel.ops = {OpKind::Sum};
        sel.counts = {4096};
        runSelection(ctx, Coll::AllReduce, sel);
      },
      opts);
}

// A ring AllGather over several channels: channels whose rings visit the
// ranks in the same order share one rank table in the plan, so a GPU launch's
// table grows with the distinct orders, not with the channel count.
TEST(GraphPlans, ChannelsWithTheSameRingShareOneRankTable) {
  const int nranks = 4, channels = 4;
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}, {"NCCL_MIN_NCHANNELS", "4"}};
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        if (!ctx.comm->graph) {
          ctx.fail("rank %d: no graph after init", ctx.rank);
          return;
        }
        std::set<std::vector<int>> orders;
        for (int ch = 0; ch < channels; ++ch) orders.insert(ctx.comm->graph->ring(ch).order);
        if (orders.size() >= static_cast<size_t>(channels)) {
          ctx.fail("rank %d: every channel has its own ring order: nothing to share", ctx.rank);
          return;
        }
        std::vector<float> in(4096, 1.0f), out(4096 * nranks, 0.0f);
        Plan plan;
        if (!RANK_OK(ctx, buildFloatPlan(ctx, in, out, &plan, CollType::AllGather))) return;
        size_t ringSegments = 0;
        for (const Lane& lane : plan.lanes)
          for (const sched::Segment& seg : lane.segments) ringSegments += seg.ringTable >= 0 ? 1 : 0;
        if (ringSegments != static_cast<size_t>(channels))
          ctx.fail("rank %d: %zu segments with a ring table, expected %d", ctx.rank, ringSegments, channels);
        if (plan.rankTable.size() != orders.size() * nranks)
          ctx.fail("rank %d: rank table of %zu entries for %zu distinct ring orders of %d ranks", ctx.rank,
                   plan.rankTable.size(), orders.size(), nranks);
      },
      opts);
}

TEST(GraphPlans, DumpFileWrittenAtInit) {
  char path[] = "/tmp/chorus_graph_dump_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  RunOptions opts;
  opts.env = {{"NCCL_GRAPH_DUMP_FILE", path}, {"NCCL_MAX_NCHANNELS", "2"}};
  runThreads(
      4,
      [&](RankCtx& ctx) {
        if (!ctx.comm->graph || ctx.comm->graph->nranks != 4) ctx.fail("rank %d: no graph after init", ctx.rank);
      },
      opts);
  std::ifstream in(path);
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  EXPECT_NE(xml.find("<graphs version=\"1\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("pattern=\"4\" nchannels=\"2\""), std::string::npos) << xml;
  for (int r = 0; r < 4; ++r) EXPECT_NE(xml.find("rank=\"" + std::to_string(r) + "\""), std::string::npos) << xml;
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  const Layout l = std::get<4>(info.param);
  return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_" +
         std::to_string(std::get<2>(info.param)) + "ranks_" + std::to_string(std::get<3>(info.param)) + "hosts_" +
         (l == Layout::RoundRobin ? "rr"
          : l == Layout::Uneven   ? "uneven"
                                  : "pcie");
}

INSTANTIATE_TEST_SUITE_P(RoundRobin, GraphColls,
                         ::testing::Combine(::testing::Values("Ring", "Tree", "Hier"),
                                            ::testing::Values("Simple", "LL"), ::testing::Values(8),
                                            ::testing::Values(2, 4), ::testing::Values(Layout::RoundRobin)),
                         paramName);
INSTANTIATE_TEST_SUITE_P(
    OddShapes, GraphColls,
    ::testing::Values(Param{"Hier", "Simple", 6, 3, Layout::RoundRobin},
                      Param{"Tree", "Simple", 6, 3, Layout::RoundRobin}, Param{"Hier", "Simple", 5, 2, Layout::Uneven},
                      Param{"Tree", "LL", 5, 2, Layout::Uneven}, Param{"Ring", "Simple", 8, 2, Layout::PcieScrambled},
                      Param{"Hier", "Simple", 8, 2, Layout::PcieScrambled}, Param{"", "", 8, 4, Layout::RoundRobin}),
    paramName);

}  // namespace
}  // namespace chorus::test
