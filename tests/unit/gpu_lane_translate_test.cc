// Host plan -> lane-kernel launch arrays (src/gpu/lane_translate.cc), on
// hand-built plans over FIFOs in host memory: step order and fields, the
// connector table (both ends of a FIFO see the same counters; one entry per
// connector), launches split where the reduction spec changes, LL piece
// sizing, and the invariants it refuses to break.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/rank_runner.h"
#include "core/comm.h"
#include "gpu/gpu_runtime.h"
#include "gpu/lane_translate.h"
#include "host/plan_builder.h"
#include "transport/connection_table.h"
#include "unit/host_fifo_util.h"

namespace chorus {
namespace {

using namespace chorus::test;

class LaneTranslate : public ::testing::Test {
 protected:
  // Position counters handed out per (end, side), as the executor would.
  std::map<std::pair<const void*, bool>, uint64_t> positions;
  gpu::PositionFor positionFor = [this](const FifoEnd& e, bool sender) { return &positions[{e.ctl, sender}]; };
  float in[1024] = {}, out[1024] = {};

  HostPlan plan;
  Task& addTask(ncclDataType_t type, ReduceKind kind) {
    plan.tasks.emplace_back();
    plan.tasks.back().spec = ReduceSpec{type, kind, nullptr, 4};
    return plan.tasks.back();
  }
  HostStep step(const Task& t, RecvConnector* r, SendConnector* s, size_t count) {
    HostStep h;
    if (r) h.recv[h.nRecv++] = r;
    if (s) h.send[h.nSend++] = s;
    h.src = reinterpret_cast<const char*>(in);
    h.dst = reinterpret_cast<char*>(out);
    h.count = count;
    h.spec = &t.spec;
    return h;
  }
};

TEST_F(LaneTranslate, StepsConnectorsAndPositionsMapOneToOne) {
  plan.tasks.reserve(4);
  HostFifo a(131072, 8, 0, 1), b(131072, 8, 2, 0);
  const Task& t = addTask(ncclFloat32, ReduceKind::Sum);
  plan.lanes.resize(1);
  plan.lanes[0].pieceBytes = 131072;
  plan.lanes[0].steps = {step(t, b.recv.get(), a.send.get(), 100), step(t, b.recv.get(), nullptr, 50),
                         step(t, nullptr, a.send.get(), 0)};  // empty steps are dropped
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  const auto& L = launches[0];
  EXPECT_EQ(L.header.type, ncclFloat32);
  EXPECT_EQ(L.header.kind, ReduceKind::Sum);
  EXPECT_EQ(L.header.divisor, 4);
  ASSERT_EQ(L.lanes.size(), 1u);
  EXPECT_EQ(L.lanes[0].nSteps, 2u);
  EXPECT_EQ(L.lanes[0].pieceBytes, 131072u);
  ASSERT_EQ(L.fifos.size(), 2u);  // b's receive end and a's send end, each once
  ASSERT_EQ(L.steps.size(), 2u);
  EXPECT_EQ(L.steps[0].nRecv, 1);
  EXPECT_EQ(L.steps[0].nSend, 1);
  EXPECT_EQ(L.steps[1].recv[0], L.steps[0].recv[0]);
  EXPECT_EQ(L.steps[0].count, 100u);
  EXPECT_EQ(L.steps[1].count, 50u);
  const dev::DevFifo& recvEnd = L.fifos[L.steps[0].recv[0]];
  const dev::DevFifo& sendEnd = L.fifos[L.steps[0].send[0]];
  EXPECT_EQ(recvEnd.tail, reinterpret_cast<uint64_t*>(&b.recv->end().ctl->tail));
  EXPECT_EQ(recvEnd.head, reinterpret_cast<uint64_t*>(&b.recv->end().ctl->head));
  EXPECT_EQ(recvEnd.peer, 2);
  EXPECT_EQ(sendEnd.peer, 1);
  EXPECT_EQ(sendEnd.slots, a.send->end().slots);
  EXPECT_EQ(sendEnd.nslots, 8u);
  EXPECT_EQ(recvEnd.position, (&positions[{b.recv->end().ctl, false}]));
  EXPECT_EQ(sendEnd.position, (&positions[{a.send->end().ctl, true}]));
  EXPECT_NE(recvEnd.position, sendEnd.position);
}

TEST_F(LaneTranslate, BothEndsOfAFifoShareCounters) {
  plan.tasks.reserve(4);
  HostFifo f(131072, 4, 0, 1);
  const Task& t = addTask(ncclFloat32, ReduceKind::Sum);
  plan.lanes.resize(2);
  plan.lanes[0].steps = {step(t, nullptr, f.send.get(), 10)};
  plan.lanes[1].steps = {step(t, f.recv.get(), nullptr, 10)};
  for (auto& l : plan.lanes) l.pieceBytes = 131072;
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(launches[0].fifos.size(), 2u);
  EXPECT_EQ(launches[0].fifos[0].tail, launches[0].fifos[1].tail);
  EXPECT_EQ(launches[0].fifos[0].head, launches[0].fifos[1].head);
  EXPECT_NE(launches[0].fifos[0].position, launches[0].fifos[1].position);  // each side counts its own
}

TEST_F(LaneTranslate, ZeroCopyOnlyWhereTheReceiverReadsTheSendersMemory) {
  plan.tasks.reserve(4);
  HostFifo reads(131072, 4, 0, 1, /*peerReads=*/true), cannot(131072, 4, 0, 2, /*peerReads=*/false);
  Task& t = addTask(ncclFloat32, ReduceKind::Sum);
  t.type = CollType::Send;  // point-to-point: a byte-copy launch, counts in bytes
  plan.lanes.resize(2);
  HostStep a = step(t, nullptr, reads.send.get(), 10), b = step(t, nullptr, cannot.send.get(), 10);
  a.dst = b.dst = nullptr;
  a.direct = b.direct = true;
  plan.lanes[0].steps = {a, step(t, nullptr, reads.send.get(), 5)};
  plan.lanes[1].steps = {b};
  for (auto& l : plan.lanes) l.pieceBytes = 131072;
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(launches[0].steps.size(), 3u);
  EXPECT_EQ(launches[0].header.type, ncclUint8);
  EXPECT_EQ(launches[0].steps[0].direct, 1);
  EXPECT_EQ(launches[0].steps[0].count, 40u) << "a descriptor's size is the step's bytes";
  EXPECT_EQ(launches[0].steps[1].direct, 0) << "an unregistered send stays a FIFO send";
  EXPECT_EQ(launches[0].steps[2].direct, 0) << "the receiver cannot read this sender's memory";
}

TEST_F(LaneTranslate, LaunchesSplitWhereTheSpecChangesAndMergeEqualOnes) {
  plan.tasks.reserve(4);
  HostFifo f(131072, 4, 0, 1);
  const Task& t0 = addTask(ncclFloat32, ReduceKind::Sum);
  const Task& t1 = addTask(ncclFloat32, ReduceKind::Sum);  // same spec: fused with t0
  const Task& t2 = addTask(ncclBfloat16, ReduceKind::Max);
  plan.lanes.resize(1);
  plan.lanes[0].pieceBytes = 131072;
  plan.lanes[0].steps = {step(t0, nullptr, f.send.get(), 10), step(t1, nullptr, f.send.get(), 20),
                         step(t2, nullptr, f.send.get(), 30)};
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].steps.size(), 2u);
  EXPECT_EQ(launches[0].header.type, ncclFloat32);
  EXPECT_EQ(launches[1].steps.size(), 1u);
  EXPECT_EQ(launches[1].header.type, ncclBfloat16);
  EXPECT_EQ(launches[1].header.kind, ReduceKind::Max);
  // The connector keeps its position counter across launches.
  EXPECT_EQ(launches[0].fifos[0].position, launches[1].fifos[0].position);
}

// A launch's parameters hold a bounded number of steps: a long run of equal
// collectives is split into several launches, at task boundaries only.
TEST_F(LaneTranslate, ManyEqualCollectivesSplitAtTaskBoundariesWhenALaunchIsFull) {
  constexpr int kTasks = 40, kStepsPerTask = 20;  // 800 steps > one launch
  plan.tasks.reserve(kTasks);
  HostFifo f(131072, 4, 0, 1);
  plan.lanes.resize(1);
  plan.lanes[0].pieceBytes = 131072;
  for (int t = 0; t < kTasks; ++t) {
    const Task& task = addTask(ncclFloat32, ReduceKind::Sum);
    for (int k = 0; k < kStepsPerTask; ++k) plan.lanes[0].steps.push_back(step(task, nullptr, f.send.get(), 1));
  }
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_GE(launches.size(), 2u);
  size_t total = 0;
  for (const auto& l : launches) {
    EXPECT_LE(l.steps.size(), static_cast<size_t>(dev::kLaunchMaxSteps));
    EXPECT_EQ(l.steps.size() % kStepsPerTask, 0u) << "a task was cut between two launches";
    EXPECT_EQ(l.header.nSteps, static_cast<int>(l.steps.size()));
    total += l.steps.size();
  }
  EXPECT_EQ(total, static_cast<size_t>(kTasks * kStepsPerTask));
}

// Point-to-point tasks move bytes: a group that sends floats and receives
// doubles is one launch of byte copies with byte counts.
TEST_F(LaneTranslate, PointToPointGroupsRunAsOneByteLaunch) {
  plan.tasks.reserve(4);
  HostFifo out0(131072, 4, 0, 1), in0(131072, 4, 1, 0);
  Task& send = addTask(ncclFloat32, ReduceKind::Sum);
  send.type = CollType::Send;
  Task& recv = addTask(ncclFloat64, ReduceKind::Sum);
  recv.type = CollType::Recv;
  plan.lanes.resize(2);
  for (auto& l : plan.lanes) l.pieceBytes = 131072;
  plan.lanes[0].steps = {step(send, nullptr, out0.send.get(), 10)};
  plan.lanes[1].steps = {step(recv, in0.recv.get(), nullptr, 3)};
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].header.type, ncclUint8);
  ASSERT_EQ(launches[0].steps.size(), 2u);
  EXPECT_EQ(launches[0].steps[0].count, 40u);
  EXPECT_EQ(launches[0].steps[1].count, 24u);
}

// Every rank launches its group's point-to-point operations before its
// collectives, whatever the call order, so no rank sits in a collective
// waiting for a peer whose send comes after that peer's collective.
TEST_F(LaneTranslate, PointToPointRunsBeforeTheGroupsCollectives) {
  plan.tasks.reserve(4);
  HostFifo ring(131072, 4, 0, 1), p2p(131072, 4, 0, 1);
  const Task& coll = addTask(ncclFloat32, ReduceKind::Sum);
  Task& send = addTask(ncclFloat32, ReduceKind::Sum);
  send.type = CollType::Send;
  plan.lanes.resize(2);
  for (auto& l : plan.lanes) l.pieceBytes = 131072;
  plan.lanes[0].steps = {step(coll, nullptr, ring.send.get(), 5)};
  plan.lanes[1].steps = {step(send, nullptr, p2p.send.get(), 7)};
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].header.type, ncclUint8);
  EXPECT_EQ(launches[0].steps[0].count, 28u);
  EXPECT_EQ(launches[1].header.type, ncclFloat32);
  EXPECT_EQ(launches[1].steps[0].count, 5u);
}

TEST_F(LaneTranslate, LLPiecesCarryHalfASlotAtMostFourKiB) {
  EXPECT_EQ(gpu::devicePieceBytes(Proto::LL, 8192, 8192), 4096u);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::LL, 2048, 2048), 1024u);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::LL, 65536, 65536), dev::kLLMaxPieceBytes);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::Simple, 131072, 131072), 131072u);
  EXPECT_EQ(gpu::devicePieceBytes(Proto::Simple, 131072, 65536), 65536u);

  plan.tasks.reserve(4);
  HostFifo f(8192, 4, 0, 1);
  const Task& t = addTask(ncclFloat16, ReduceKind::Sum);
  plan.lanes.resize(1);
  plan.lanes[0].pieceBytes = 8192;
  plan.lanes[0].proto = Proto::LL;
  plan.lanes[0].steps = {step(t, nullptr, f.send.get(), 10)};
  std::vector<gpu::LaunchArrays> launches;
  ASSERT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclSuccess);
  EXPECT_EQ(launches[0].lanes[0].protocol, dev::Protocol::LL);
  EXPECT_EQ(launches[0].lanes[0].pieceBytes, 4096u);
}

TEST_F(LaneTranslate, RefusesAConnectorSharedByTwoLanes) {
  plan.tasks.reserve(4);
  HostFifo f(131072, 4, 0, 1);
  const Task& t = addTask(ncclFloat32, ReduceKind::Sum);
  plan.lanes.resize(2);
  plan.lanes[0].steps = {step(t, nullptr, f.send.get(), 10)};
  plan.lanes[1].steps = {step(t, nullptr, f.send.get(), 10)};
  std::vector<gpu::LaunchArrays> launches;
  EXPECT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclInternalError);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("used by lanes 0 and 1"), std::string::npos);
}

TEST_F(LaneTranslate, RefusesTooManyLanesAndMissingCounters) {
  plan.tasks.reserve(4);
  const Task& t = addTask(ncclFloat32, ReduceKind::Sum);
  std::vector<std::unique_ptr<HostFifo>> fifos;
  plan.lanes.resize(gpu::kMaxLanesPerLaunch + 1);
  for (auto& l : plan.lanes) {
    fifos.push_back(std::make_unique<HostFifo>(4096, 2, 0, 1));
    l.pieceBytes = 4096;
    l.steps = {step(t, nullptr, fifos.back()->send.get(), 1)};
  }
  std::vector<gpu::LaunchArrays> launches;
  EXPECT_EQ(gpu::translatePlan(plan, positionFor, &launches), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("65 lanes"), std::string::npos) << ncclGetLastError(nullptr);

  plan.lanes.resize(1);
  gpu::PositionFor none = [](const FifoEnd&, bool) -> uint64_t* { return nullptr; };
  EXPECT_EQ(gpu::translatePlan(plan, none, &launches), ncclInternalError);
}

// Real plans from the plan builder (every algorithm and protocol, several
// collectives) must fit the lane kernel: they translate, keep every non-empty
// step, stay within the lane limit, and across all ranks each FIFO appears
// exactly once as a send end and once as a receive end.
using RealCase = std::tuple<const char*, const char*, CollType>;
class LaneTranslateRealPlans : public ::testing::TestWithParam<RealCase> {};

TEST_P(LaneTranslateRealPlans, EveryRankTranslatesAndFifosPairUp) {
  const auto [algo, proto, coll] = GetParam();
  const int nranks = 5;
  std::mutex mu;
  std::map<const void*, std::pair<int, int>> ends;  // FIFO -> (send ends, receive ends)
  RunOptions opts;
  opts.env = {{"NCCL_ALGO", algo}, {"NCCL_PROTO", proto}};
  runThreads(
      nranks,
      [&](RankCtx& ctx) {
        const size_t count = 300001;  // several rounds and pieces, ragged
        std::vector<float> in(count * nranks, 1.0f), out(count * nranks, 0.0f);
        HostPlan plan;
        plan.comm = ctx.comm;
        Task t;
        t.type = coll;
        t.comm = ctx.comm;
        t.sendbuff = in.data();
        t.recvbuff = out.data();
        t.count = count;
        t.dtype = ncclFloat32;
        t.spec = ReduceSpec{ncclFloat32, ReduceKind::Sum, nullptr, 1};
        plan.tasks.push_back(t);
        if (!RANK_OK(ctx, PlanBuilder(ctx.comm, &plan).build())) return;
        if (!RANK_OK(ctx, ctx.comm->conns->connectAll(waitBoundAfter(10000)))) return;
        std::map<std::pair<const void*, bool>, uint64_t> positions;
        gpu::PositionFor positionFor = [&](const FifoEnd& e, bool sender) { return &positions[{e.ctl, sender}]; };
        std::vector<gpu::LaunchArrays> launches;
        if (!RANK_OK(ctx, gpu::translatePlan(plan, positionFor, &launches))) return;
        size_t hostSteps = 0, devSteps = 0;
        for (const Lane& l : plan.lanes)
          for (const HostStep& h : l.steps) hostSteps += h.count > 0;
        for (const auto& L : launches) {
          devSteps += L.steps.size();
          if (L.lanes.size() > gpu::kMaxLanesPerLaunch) ctx.fail("rank %d: %zu lanes", ctx.rank, L.lanes.size());
          for (const auto& dl : L.lanes)
            if (dl.protocol == dev::Protocol::LL && dl.pieceBytes > dev::kLLMaxPieceBytes)
              ctx.fail("rank %d: LL piece of %u bytes", ctx.rank, dl.pieceBytes);
        }
        if (launches.size() != 1) ctx.fail("rank %d: %zu launches for one task", ctx.rank, launches.size());
        if (hostSteps != devSteps) ctx.fail("rank %d: %zu host steps, %zu device steps", ctx.rank, hostSteps, devSteps);
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& [key, value] : positions) {
          (void)value;
          auto& e = ends[key.first];
          (key.second ? e.first : e.second) += 1;
        }
      },
      opts);
  ASSERT_FALSE(ends.empty());
  for (const auto& [fifo, e] : ends) {
    EXPECT_EQ(e.first, 1) << "FIFO " << fifo << " has " << e.first << " send ends";
    EXPECT_EQ(e.second, 1) << "FIFO " << fifo << " has " << e.second << " receive ends";
  }
}

INSTANTIATE_TEST_SUITE_P(AlgosProtosColls, LaneTranslateRealPlans,
                         ::testing::Combine(::testing::Values("Ring", "Tree"), ::testing::Values("Simple", "LL"),
                                            ::testing::Values(CollType::AllReduce, CollType::AllGather,
                                                              CollType::ReduceScatter, CollType::Broadcast)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_" +
                                  std::to_string(int(std::get<2>(info.param)));
                         });

}  // namespace
}  // namespace chorus
