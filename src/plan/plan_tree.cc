// Expands the double binary tree all-reduce (src/sched/tree.h). Each
// channel's share is halved, one half per tree. On every rank but a tree's
// root the tree uses two lanes: reduce-up (children + own input -> parent)
// and broadcast-down (parent -> output + children). They must be separate
// lanes: a rank has to keep forwarding partial sums up while the first
// results already come down. The root does both in one step: it reduces its
// children's pieces with its input, keeps the result and sends it down.
//
// The trees come from the communicator's graph (graph/links.h: a double
// binary tree over hosts with a chain inside each host, or over the ranks
// of a single host along its ring); without a graph, over rank indices.
#include "core/result.h"
#include "graph/links.h"
#include "plan/plan_builder.h"
#include "sched/tree.h"

namespace chorus {
namespace {

ncclResult_t treeHalf(PlanBuilder& b, const Task& t, const TuneDecision& d, int ch, int tree, sched::Range range) {
  const int chId = ch * 2 + tree;
  const graph::CommGraph* g = b.graph();
  const sched::TreeLinks L =
      g ? graph::treeLinks(*g, ch, tree, b.rank()) : sched::treeLinks(b.rank(), b.nranks(), tree);

  // Reduce-up: children's pieces and the local input, to the parent.
  sched::Segment up = b.local(t, t.sendbuff, nullptr, range.count, true, false);
  up.begin = range.begin;
  for (int i = 0; i < L.nChildren; ++i)
    CHORUS_CHECK(b.recvFrom(ConnClass::TreeUp, d.proto, chId, L.children[i], &up.conn[i]));

  if (L.parent < 0) {  // root: reduce, keep, send down
    up.dst = t.recvbuff;
    up.flags |= sched::kSegHasDst | sched::kSegPost;
    for (int i = 0; i < L.nChildren; ++i)
      CHORUS_CHECK(b.sendTo(ConnClass::TreeDown, d.proto, chId, L.children[i], &up.conn[2 + i]));
    b.lane(ConnClass::TreeUp, d.proto, chId).segments.push_back(up);
    return ncclSuccess;
  }
  CHORUS_CHECK(b.sendTo(ConnClass::TreeUp, d.proto, chId, L.parent, &up.conn[2]));
  b.lane(ConnClass::TreeUp, d.proto, chId).segments.push_back(up);

  // Broadcast-down: the parent's result to the output and the children.
  sched::Segment down = b.local(t, nullptr, t.recvbuff, range.count, false, false);
  down.begin = range.begin;
  CHORUS_CHECK(b.recvFrom(ConnClass::TreeDown, d.proto, chId, L.parent, &down.conn[0]));
  for (int i = 0; i < L.nChildren; ++i)
    CHORUS_CHECK(b.sendTo(ConnClass::TreeDown, d.proto, chId, L.children[i], &down.conn[2 + i]));
  b.lane(ConnClass::TreeDown, d.proto, chId).segments.push_back(down);
  return ncclSuccess;
}

}  // namespace

ncclResult_t expandTree(PlanBuilder& b, const Task& t, const TuneDecision& d) {
  if (t.type != CollType::AllReduce) return fail(ncclInternalError, "tree schedule requested for %s", collName(t.type));
  const size_t align = std::max<size_t>(1, 64 / typeSize(t.dtype));
  for (int ch = 0; ch < d.nchannels; ++ch) {
    sched::Range range = sched::splitAligned(t.count, d.nchannels, ch, align);
    for (int tree = 0; tree < 2; ++tree) {
      sched::Range half = sched::splitAligned(range.count, 2, tree, align);
      half.begin += range.begin;
      if (half.count > 0) CHORUS_CHECK(treeHalf(b, t, d, ch, tree, half));
    }
  }
  return ncclSuccess;
}

}  // namespace chorus
