#include "gpu/lane_translate.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>

#include "core/result.h"

namespace chorus::gpu {
namespace {

static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "FIFO counters must be plain 64-bit words");

bool sameSpec(const ReduceSpec& a, const ReduceSpec& b) {
  return a.type == b.type && a.kind == b.kind && a.scalar == b.scalar && a.divisor == b.divisor;
}

dev::DevFifo deviceEnd(const FifoEnd& end, uint64_t* position) {
  dev::DevFifo f;
  f.tail = reinterpret_cast<uint64_t*>(&end.ctl->tail);
  f.head = reinterpret_cast<uint64_t*>(&end.ctl->head);
  f.sizes = end.ctl->sizes;
  f.slots = end.slots;
  f.slotBytes = end.slotBytes;
  f.nslots = end.nslots;
  f.position = position;
  f.peer = end.peer;
  return f;
}

// Builds one launch from the steps of every lane whose spec equals `spec`,
// starting at each lane's cursor; advances the cursors past them.
class LaunchBuilder {
 public:
  LaunchBuilder(const PositionFor& positionFor, std::map<const void*, int>* laneOfConnector)
      : positionFor_(positionFor), laneOfConnector_(laneOfConnector) {}

  ncclResult_t addLane(const Lane& lane, int laneId, size_t* cursor, const std::set<const ReduceSpec*>& allowed,
                       bool asBytes, LaunchArrays* out) {
    dev::DevLane dl;
    dl.firstStep = static_cast<uint32_t>(out->steps.size());
    dl.protocol = lane.proto == Proto::LL ? dev::Protocol::LL : dev::Protocol::Simple;
    uint32_t minSlot = UINT32_MAX;
    for (; *cursor < lane.steps.size() && allowed.count(lane.steps[*cursor].spec) != 0; ++*cursor) {
      const HostStep& h = lane.steps[*cursor];
      if (h.count == 0) continue;
      dev::DevStep d;
      for (int i = 0; i < h.nRecv; ++i) {
        int idx = 0;
        CHORUS_CHECK(fifoIndex(h.recv[i], h.recv[i]->end(), false, laneId, out, &idx));
        d.recv[d.nRecv++] = static_cast<int16_t>(idx);
        minSlot = std::min(minSlot, h.recv[i]->end().slotBytes);
      }
      for (int i = 0; i < h.nSend; ++i) {
        int idx = 0;
        CHORUS_CHECK(fifoIndex(h.send[i], h.send[i]->end(), true, laneId, out, &idx));
        d.send[d.nSend++] = static_cast<int16_t>(idx);
        minSlot = std::min(minSlot, h.send[i]->end().slotBytes);
      }
      d.direct = h.direct && h.nSend == 1 && h.nRecv == 0 && h.send[0]->end().peerReadsOurBuffers ? 1 : 0;
      d.preSrc = h.preSrc;
      d.post = h.post;
      d.src = h.src;
      d.dst = h.dst;
      d.count = asBytes ? h.count * typeSize(h.spec->type) : h.count;
      out->steps.push_back(d);
    }
    dl.nSteps = static_cast<uint32_t>(out->steps.size()) - dl.firstStep;
    if (dl.nSteps == 0) return ncclSuccess;
    dl.pieceBytes = devicePieceBytes(lane.proto, lane.pieceBytes, minSlot);
    if (minSlot != UINT32_MAX && dl.pieceBytes > minSlot)
      return fail(ncclInternalError, "GPU plan: lane %d moves pieces of %u bytes through %u-byte slots", laneId,
                  dl.pieceBytes, minSlot);
    out->lanes.push_back(dl);
    return ncclSuccess;
  }

 private:
  ncclResult_t fifoIndex(const void* connector, const FifoEnd& end, bool sender, int laneId, LaunchArrays* out,
                         int* idx) {
    auto owner = laneOfConnector_->emplace(connector, laneId).first;
    if (owner->second != laneId)
      return fail(ncclInternalError, "GPU plan: a connector to rank %d is used by lanes %d and %d", end.peer,
                  owner->second, laneId);
    auto it = index_.find(connector);
    if (it != index_.end()) {
      *idx = it->second;
      return ncclSuccess;
    }
    uint64_t* position = positionFor_(end, sender);
    if (position == nullptr)
      return fail(ncclInternalError, "GPU plan: no device position counter for the connector to rank %d", end.peer);
    *idx = static_cast<int>(out->fifos.size());
    index_[connector] = *idx;
    out->fifos.push_back(deviceEnd(end, position));
    return ncclSuccess;
  }

  const PositionFor& positionFor_;
  std::map<const void*, int>* laneOfConnector_;
  std::map<const void*, int> index_;
};

// Tasks that must share one launch: a collective alone, or all the
// point-to-point tasks of the plan (with the all-to-all, gather and scatter
// collectives, which are made of sends and receives). A send and a receive of one group may
// depend on each other (and on other ranks' point-to-point operations) in any
// order, so they must progress together; they run first, before the
// collectives, on every rank alike, so no rank waits in a collective for data
// another rank would send only after its own collective.
struct TaskUnit {
  std::vector<size_t> tasks;
  bool p2p = false;
};

// Operations built from sends and receives on the point-to-point lanes
// (src/host/plan_p2p.cc): they share those lanes, so they share the unit.
bool isP2P(CollType t) {
  return t == CollType::Send || t == CollType::Recv || t == CollType::AlltoAll || t == CollType::Gather ||
         t == CollType::Scatter;
}

std::vector<TaskUnit> taskUnits(const std::vector<Task>& tasks) {
  std::vector<TaskUnit> units;
  TaskUnit p2p;
  p2p.p2p = true;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (isP2P(tasks[i].type)) p2p.tasks.push_back(i);
  if (!p2p.tasks.empty()) units.push_back(std::move(p2p));
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!isP2P(tasks[i].type)) units.push_back({{i}, false});
  return units;
}

// Point-to-point data is moved, never combined: it runs as bytes, so a group
// that sends floats and receives ints still fits one launch.
ReduceSpec launchSpecOf(const Task& t, bool p2p) {
  if (!p2p) return t.spec;
  ReduceSpec bytes{};
  bytes.type = ncclUint8;
  bytes.kind = ReduceKind::Sum;
  bytes.scalar = nullptr;
  bytes.divisor = 1;
  return bytes;
}

struct Attempt {
  LaunchArrays launch;
  std::vector<size_t> cursor;
  std::map<const void*, int> laneOfConnector;
};

bool fits(const LaunchArrays& l) {
  return l.lanes.size() <= kMaxLanesPerLaunch && l.fifos.size() <= static_cast<size_t>(dev::kLaunchMaxFifos) &&
         l.steps.size() <= static_cast<size_t>(dev::kLaunchMaxSteps);
}

// Builds the launch of the tasks of units u..w from `base` cursors; every
// lane takes its steps of those tasks, in order.
ncclResult_t tryLaunch(const HostPlan& plan, const PositionFor& positionFor, const std::vector<TaskUnit>& units,
                       size_t u, size_t w, const Attempt& base, Attempt* out) {
  *out = base;
  out->launch = LaunchArrays{};
  std::set<const ReduceSpec*> allowed;
  for (size_t k = u; k <= w; ++k)
    for (size_t t : units[k].tasks) allowed.insert(&plan.tasks[t].spec);
  const ReduceSpec spec = launchSpecOf(plan.tasks[units[u].tasks[0]], units[u].p2p);
  dev::LaneLaunch& h = out->launch.header;
  h.type = spec.type;
  h.kind = spec.kind;
  h.scalar = spec.scalar;
  h.divisor = spec.divisor;
  out->launch.scalarOnHost = spec.scalarOnHost;
  LaunchBuilder builder(positionFor, &out->laneOfConnector);
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    CHORUS_CHECK(
        builder.addLane(plan.lanes[l], static_cast<int>(l), &out->cursor[l], allowed, units[u].p2p, &out->launch));
  h.nLanes = static_cast<int>(out->launch.lanes.size());
  h.nSteps = static_cast<int>(out->launch.steps.size());
  h.nFifos = static_cast<int>(out->launch.fifos.size());
  return ncclSuccess;
}

bool sameLaunchSpec(const HostPlan& plan, const TaskUnit& a, const TaskUnit& b) {
  if (a.p2p || b.p2p) return a.p2p && b.p2p;
  return sameSpec(launchSpecOf(plan.tasks[a.tasks[0]], false), launchSpecOf(plan.tasks[b.tasks[0]], false));
}

}  // namespace

uint32_t devicePieceBytes(Proto proto, size_t lanePieceBytes, uint32_t slotBytes) {
  const uint32_t piece = static_cast<uint32_t>(std::min<size_t>(lanePieceBytes, slotBytes));
  if (proto != Proto::LL) return piece;
  return std::min({dev::llPayloadBytes(slotBytes), dev::kLLMaxPieceBytes, piece});
}

ncclResult_t translatePlan(const HostPlan& plan, const PositionFor& positionFor, std::vector<LaunchArrays>* out) {
  out->clear();
  const std::vector<TaskUnit> units = taskUnits(plan.tasks);
  Attempt done;
  done.cursor.assign(plan.lanes.size(), 0);
  for (size_t u = 0; u < units.size();) {
    // Grow the launch unit by unit while the spec stays the same and it fits.
    Attempt best;
    size_t last = u;
    CHORUS_CHECK(tryLaunch(plan, positionFor, units, u, u, done, &best));
    if (!fits(best.launch))
      return fail(ncclInvalidUsage,
                  "GPU plan: %s of %zu task(s) needs %zu lanes, %zu connector ends and %zu steps in one kernel "
                  "launch; a launch holds %zu, %d and %d (split the group, or use fewer channels)",
                  units[u].p2p ? "a group of point-to-point operations" : collName(plan.tasks[units[u].tasks[0]].type),
                  units[u].tasks.size(), best.launch.lanes.size(), best.launch.fifos.size(), best.launch.steps.size(),
                  kMaxLanesPerLaunch, dev::kLaunchMaxFifos, dev::kLaunchMaxSteps);
    for (size_t w = u + 1; w < units.size() && sameLaunchSpec(plan, units[u], units[w]); ++w) {
      Attempt bigger;
      CHORUS_CHECK(tryLaunch(plan, positionFor, units, u, w, done, &bigger));
      if (!fits(bigger.launch)) break;
      best = std::move(bigger);
      last = w;
    }
    done.cursor = best.cursor;
    done.laneOfConnector = best.laneOfConnector;
    if (!best.launch.lanes.empty()) out->push_back(std::move(best.launch));
    u = last + 1;
  }
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    if (done.cursor[l] != plan.lanes[l].steps.size())
      return fail(ncclInternalError, "GPU plan: lane %zu has steps out of task order or of no task of the plan", l);
  return ncclSuccess;
}

}  // namespace chorus::gpu
