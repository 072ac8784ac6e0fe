#include "chorus_topo/plan_report.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "core/result.h"
#include "plan/dry_connectors.h"
#include "plan/plan_builder.h"

namespace chorus::tools {
namespace {

// Distinct, never dereferenced buffer addresses: the plan only records them.
constexpr uintptr_t kSendBuffer = uintptr_t(1) << 40, kRecvBuffer = uintptr_t(2) << 40;

Task taskFor(const PlanOptions& o, int nranks) {
  Task t;
  t.type = o.coll;
  t.dtype = ncclFloat32;
  t.spec = ReduceSpec{ncclFloat32, ReduceKind::Sum, nullptr, 1};
  t.root = 0;
  const size_t elems = o.bytes / typeSize(t.dtype);
  const bool perRank = o.coll == CollType::AllGather || o.coll == CollType::ReduceScatter;
  t.count = perRank ? elems / static_cast<size_t>(nranks) : elems;
  t.sendbuff = reinterpret_cast<const void*>(kSendBuffer);
  t.recvbuff = reinterpret_cast<void*>(kRecvBuffer);
  return t;
}

ncclResult_t buildOnce(const PlanContext& ctx, const Task& t, std::unique_ptr<Plan>* out) {
  auto plan = std::make_unique<Plan>();
  plan->tasks.push_back(t);
  PlanBuilder builder(ctx, plan.get());
  CHORUS_CHECK(builder.build());
  *out = std::move(plan);
  return ncclSuccess;
}

void printConn(FILE* out, const Plan& plan, const DryConnectors& dry, int16_t id) {
  const ConnRef& ref = plan.conns[static_cast<size_t>(id)];
  const void* c = ref.recv ? static_cast<const void*>(ref.recv) : static_cast<const void*>(ref.send);
  const DryConnectors::Info* info = dry.info(c);
  if (info == nullptr) return;
  fprintf(out, " %s%s ch%u rank %d", info->send ? "send→" : "recv←", connClassName(info->key.cls),
          info->key.channel, info->key.peer);
}

void printSegment(FILE* out, const Plan& plan, const DryConnectors& dry, const sched::Segment& s) {
  fprintf(out, "    %-13s elements [%llu, +%llu)", sched::segmentKindName(s.kind),
          static_cast<unsigned long long>(s.begin), static_cast<unsigned long long>(s.count));
  if (s.kind != sched::SegmentKind::Single)
    fprintf(out, " rounds of %llu, %llu rounds", static_cast<unsigned long long>(s.roundElems),
            static_cast<unsigned long long>(sched::segmentRounds(s)));
  fprintf(out, ", %llu steps", static_cast<unsigned long long>(sched::segmentSteps(s)));
  if (s.kind == sched::SegmentKind::Hier)
    fprintf(out, ", local %d of %d, inter %d of %d", s.pos, s.nranks, s.pos2, s.nranks2);
  else if (s.kind != sched::SegmentKind::Single)
    fprintf(out, ", ring position %d of %d", s.pos, s.nranks);
  fprintf(out, "\n      connectors:");
  for (int16_t id : s.conn)
    if (id != sched::kNoConn) printConn(out, plan, dry, id);
  fprintf(out, "\n");
}

}  // namespace

int printPlan(FILE* out, const graph::CommGraph& g, const CommConfig& cfg, const PlanOptions& o) {
  if (o.rank < 0 || o.rank >= g.nranks) {
    fprintf(stderr, "chorus-topo: --rank %d is not a rank of the %d-rank job\n", o.rank, g.nranks);
    return 1;
  }
  DryConnectors dry;
  PlanContext ctx;
  ctx.rank = o.rank;
  ctx.nranks = g.nranks;
  ctx.config = &cfg;
  ctx.graph = g.nranks > 0 && g.nchannels() > 0 ? &g : nullptr;
  ctx.conns = &dry;
  const Task task = taskFor(o, g.nranks);
  std::unique_ptr<Plan> plan;
  if (buildOnce(ctx, task, &plan) != ncclSuccess) {
    fprintf(stderr, "chorus-topo: building the plan failed: %s\n", lastErrorMessage());
    return 1;
  }
  // The build time: the median of repeated builds (connectors already known).
  std::vector<double> us;
  for (int i = 0; i < 51; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<Plan> again;
    (void)buildOnce(ctx, task, &again);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + 25, us.end());
  fprintf(out, "\n== Plan: %s of %zu bytes (%zu x float), rank %d of %d ==\n", collName(o.coll), o.bytes, task.count,
          o.rank, g.nranks);
  for (size_t l = 0; l < plan->lanes.size(); ++l) {
    const Lane& lane = plan->lanes[l];
    fprintf(out, "  lane %zu: %s, pieces of %u bytes, %zu segment(s)\n", l, lane.proto == Proto::LL ? "LL" : "Simple",
            lane.pieceBytes, lane.segments.size());
    for (const sched::Segment& s : lane.segments) printSegment(out, *plan, dry, s);
  }
  fprintf(out, "  plan size: %zu bytes (%zu lanes, %zu connectors, %zu rank-table entries)\n",
          planFootprintBytes(*plan), plan->lanes.size(), plan->conns.size(), plan->rankTable.size());
  fprintf(out, "  build time: %.1f us (median of 51 builds)\n", us[25]);
  return 0;
}

}  // namespace chorus::tools
