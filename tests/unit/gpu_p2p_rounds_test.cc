// A group of point-to-point operations larger than one GPU launch holds (an
// all-to-all of 40 ranks needs 79 lanes, a launch holds 64) is cut by peer
// into launches of whole rounds in increasing order (src/gpu/lane_translate.h:
// round d holds the sends to rank + d and the receives from rank - d). These
// tests translate real plans of 40 ranks (threads, host mode: translation is
// plain C++) and check that
//  - every launch fits the kernel's limits and every step of the plan is kept;
//  - each launch holds whole rounds, in increasing order;
//  - every FIFO is named once as a send end and once as a receive end;
//  - all ranks' launches, run one after the other per rank as a stream runs
//    them, can all finish: an operation completes once the launch holding it
//    and the peer's launch holding the matching operation both run. Ranks with
//    fewer peers cut at other rounds than ranks with many (the sparse case).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/fifo_end_tally.h"
#include "common/rank_runner.h"
#include "common/task_builder.h"
#include "common/translate_rank_plan.h"
#include "core/comm.h"

namespace chorus::test {
namespace {

using sched::kNoConn;

constexpr int kRanks = 40;
constexpr size_t kCount = 16;  // floats per peer

// One operation of a launch: (peer, this rank sends).
using Op = std::pair<int, bool>;
using LaunchOps = std::set<Op>;

struct Recorded {
  std::mutex mutex;
  std::map<int, std::vector<LaunchOps>> launchesOf;  // rank -> its launches in order
};

Task p2pTask(RankCtx& ctx, CollType type, int peer, void* send, void* recv, size_t count) {
  return makeTask(ctx.comm, type, ncclFloat32, sumOf(ncclFloat32), send, recv, count, peer);
}

int roundOf(int rank, const Op& op) {
  return op.second ? (op.first - rank + kRanks) % kRanks : (rank - op.first + kRanks) % kRanks;
}

// The launch's operations, and a failure when its rounds are not one
// increasing run after those of the launch before (`lastRound`).
LaunchOps opsOf(RankCtx& ctx, const gpu::LaunchArrays& L, size_t maxLanes, int* lastRound) {
  LaunchOps ops;
  int lo = kRanks, hi = -1;
  for (const sched::Segment& s : L.segments) {
    Op op{-1, false};
    if (s.conn[2] != kNoConn) op = {L.fifos[static_cast<size_t>(s.conn[2])].peer, true};
    if (s.conn[0] != kNoConn) op = {L.fifos[static_cast<size_t>(s.conn[0])].peer, false};
    if (op.first < 0) continue;  // a copy to itself
    ops.insert(op);
    lo = std::min(lo, roundOf(ctx.rank, op));
    hi = std::max(hi, roundOf(ctx.rank, op));
  }
  if (L.lanes.size() > maxLanes || L.segments.size() > static_cast<size_t>(dev::kLaunchMaxSegments) ||
      L.fifos.size() > static_cast<size_t>(dev::kLaunchMaxFifos) ||
      L.tasks.size() > static_cast<size_t>(dev::kLaunchMaxTasks))
    ctx.fail("rank %d: a launch of %zu lanes, %zu segments, %zu fifos, %zu tasks", ctx.rank, L.lanes.size(),
             L.segments.size(), L.fifos.size(), L.tasks.size());
  if (hi >= 0 && lo <= *lastRound)
    ctx.fail("rank %d: a launch of rounds %d-%d after one that reached round %d", ctx.rank, lo, hi, *lastRound);
  if (hi >= 0) *lastRound = hi;
  return ops;
}

// Translates this rank's group (launches of at most `maxLanes` lanes) and
// records its launches.
void translateGroup(RankCtx& ctx, Plan& plan, size_t maxLanes, FifoEndTally& tally, Recorded& rec) {
  FifoEndTally::Positions positions;
  std::vector<gpu::LaunchArrays> launches;
  if (!translateRankPlan(ctx, plan, &positions, &launches, maxLanes)) return;
  std::vector<LaunchOps> ops;
  ops.reserve(launches.size());
  int lastRound = -1;
  for (const gpu::LaunchArrays& L : launches) ops.push_back(opsOf(ctx, L, maxLanes, &lastRound));
  if (planSteps(plan) != launchSteps(launches))
    ctx.fail("rank %d: %llu plan steps, %llu in the launches", ctx.rank,
             static_cast<unsigned long long>(planSteps(plan)), static_cast<unsigned long long>(launchSteps(launches)));
  tally.add(positions);
  std::lock_guard<std::mutex> lock(rec.mutex);
  rec.launchesOf[ctx.rank] = std::move(ops);
}

// Runs every rank's launches in order: an operation completes when the peer
// runs the launch holding the matching one. "" when all finish.
std::string runToTheEnd(std::map<int, std::vector<LaunchOps>> launchesOf) {
  std::map<int, size_t> running;
  for (const auto& [rank, launches] : launchesOf) running[rank] = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (auto& [rank, launches] : launchesOf) {
      const size_t k = running[rank];
      if (k == launches.size()) continue;
      for (auto it = launches[k].begin(); it != launches[k].end();) {
        const auto [peer, sends] = *it;
        const size_t pk = running[peer];
        auto& peerOps = launchesOf[peer];
        if (pk < peerOps.size() && peerOps[pk].erase({rank, !sends}) == 1) {
          it = launches[k].erase(it);
          moved = true;
        } else {
          ++it;
        }
      }
      if (launches[k].empty()) {
        ++running[rank];
        moved = true;
      }
    }
  }
  for (const auto& [rank, launches] : launchesOf)
    if (running[rank] != launches.size())
      return "rank " + std::to_string(rank) + " stuck in launch " + std::to_string(running[rank]) + " of " +
             std::to_string(launches.size());
  return "";
}

RunOptions smallFifos() {
  RunOptions opts;
  // 1560 connections per direction: small FIFOs keep the test's memory small.
  opts.env = {{"CHORUS_SLOT_BYTES", "4096"}, {"CHORUS_SLOTS", "2"}};
  return opts;
}

// The runner itself: two ranks that each send first, in a launch of its own,
// and receive in the next one wait for each other forever.
TEST(GpuP2PRounds, TheRunnerSeesLaunchesThatWaitForEachOther) {
  std::map<int, std::vector<LaunchOps>> stuck;
  stuck[0] = {LaunchOps{{1, true}}, LaunchOps{{1, false}}};
  stuck[1] = {LaunchOps{{0, true}}, LaunchOps{{0, false}}};
  EXPECT_NE(runToTheEnd(stuck), "");
  std::map<int, std::vector<LaunchOps>> paired;
  paired[0] = {LaunchOps{{1, true}}, LaunchOps{{1, false}}};
  paired[1] = {LaunchOps{{0, false}}, LaunchOps{{0, true}}};
  EXPECT_EQ(runToTheEnd(paired), "");
}

// Every rank adds its tasks (addTasks(ctx, plan, in, out): buffers of kCount
// floats per rank), translates its plan and records its launches in `rec`.
template <class AddTasks>
void translateOnEveryRank(AddTasks addTasks, Recorded& rec, size_t maxLanes = gpu::kMaxLanesPerLaunch) {
  FifoEndTally tally;
  runThreads(
      kRanks,
      [&](RankCtx& ctx) {
        std::vector<float> in(kCount * kRanks, 1.0f), out(kCount * kRanks, 0.0f);
        Plan plan;
        plan.comm = ctx.comm;
        addTasks(ctx, plan, in, out);
        translateGroup(ctx, plan, maxLanes, tally, rec);
      },
      smallFifos());
  tally.expectEachFifoPairedOnce();
  EXPECT_EQ(rec.launchesOf.size(), static_cast<size_t>(kRanks));
}

TEST(GpuP2PRounds, AnAllToAllOfFortyRanksRunsAsLaunchesOfWholeRounds) {
  Recorded rec;
  translateOnEveryRank(
      [](RankCtx& ctx, Plan& plan, std::vector<float>& in, std::vector<float>& out) {
        plan.tasks.push_back(p2pTask(ctx, CollType::AlltoAll, 0, in.data(), out.data(), kCount));
      },
      rec);
  for (const auto& [rank, launches] : rec.launchesOf) EXPECT_GE(launches.size(), 2u) << "rank " << rank;
  EXPECT_EQ(runToTheEnd(rec.launchesOf), "");
}

// Ranks sharing one GPU get fewer lanes per launch (SMs / ranks): the cut
// follows that cap, not the kernel's 64.
TEST(GpuP2PRounds, TheDevicesLaneCapCutsSmallerLaunches) {
  Recorded rec;
  constexpr size_t kCap = 16;
  translateOnEveryRank(
      [](RankCtx& ctx, Plan& plan, std::vector<float>& in, std::vector<float>& out) {
        plan.tasks.push_back(p2pTask(ctx, CollType::AlltoAll, 0, in.data(), out.data(), kCount));
      },
      rec, kCap);
  for (const auto& [rank, launches] : rec.launchesOf) EXPECT_GE(launches.size(), 5u) << "rank " << rank;
  EXPECT_EQ(runToTheEnd(rec.launchesOf), "");
}

// Ranks 0-19 exchange with every rank, ranks 20-39 only with ranks 0-19: the
// first need several launches, the others fit one, so they cut at other rounds.
TEST(GpuP2PRounds, RanksThatCutAtDifferentRoundsStillAllFinish) {
  Recorded rec;
  translateOnEveryRank(
      [](RankCtx& ctx, Plan& plan, std::vector<float>& in, std::vector<float>& out) {
        for (int p = 0; p < kRanks; ++p) {
          if (p == ctx.rank || std::min(p, ctx.rank) >= kRanks / 2) continue;
          const size_t at = static_cast<size_t>(p) * kCount;
          plan.tasks.push_back(p2pTask(ctx, CollType::Send, p, in.data() + at, nullptr, kCount));
          plan.tasks.push_back(p2pTask(ctx, CollType::Recv, p, nullptr, out.data() + at, kCount));
        }
      },
      rec);
  ASSERT_EQ(rec.launchesOf.size(), static_cast<size_t>(kRanks));
  EXPECT_GE(rec.launchesOf[0].size(), 2u);
  EXPECT_EQ(rec.launchesOf[kRanks - 1].size(), 1u);
  EXPECT_EQ(runToTheEnd(rec.launchesOf), "");
}

}  // namespace
}  // namespace chorus::test
