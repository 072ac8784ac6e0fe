#include "gpu/lane_translate.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <set>

#include "core/comm.h"
#include "core/result.h"
#include "plan/wire_geometry.h"

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
  f.prints = &end.ctl->prints;
  f.peer = end.peer;
  return f;
}

// Whether the launch's lane must wait at its end until `send`'s receiver
// took every slot (the host executor's sendsTaken, src/plan/plan_verdict.cc).
bool drained(const Plan& plan, const SendConnector* send) {
  if (!plan.sendsClassified) return true;
  return std::find(plan.unprovenSends.begin(), plan.unprovenSends.end(), send) != plan.unprovenSends.end();
}

// The launch-local index of plan task `task` (LaunchArrays::tasks).
uint16_t launchTask(size_t task, LaunchArrays* out) {
  auto it = std::find(out->tasks.begin(), out->tasks.end(), task);
  if (it == out->tasks.end()) it = out->tasks.insert(it, task);
  return static_cast<uint16_t>(it - out->tasks.begin());
}

// Ring, hier and direct-pair steps must fit in half of each FIFO (sched/ring.h:
// with more, every rank fills its neighbour's FIFO in one step and then waits
// on it in the next, holding the slot its neighbour waits for). The largest
// step is in the first round; bytes, or 0 for kinds without the rule.
uint64_t largestHalfFifoStepBytes(const sched::Segment& s, const int32_t* table, uint64_t elemBytes) {
  const bool halfFifo = s.kind == sched::SegmentKind::RingAllReduce || s.kind == sched::SegmentKind::RingGather ||
                        s.kind == sched::SegmentKind::RingScatter || s.kind == sched::SegmentKind::DirectPair ||
                        s.kind == sched::SegmentKind::Hier;
  if (!halfFifo) return 0;
  uint64_t most = 0;
  const uint64_t steps = std::min(sched::segmentSteps(s), sched::stepsPerRound(s));
  for (uint64_t i = 0; i < steps; ++i) most = std::max(most, sched::segmentStep(s, table, i).count);
  return most * elemBytes;
}

// Builds one launch from the segments of every lane whose task is in
// `allowed`, starting at each lane's cursor; advances the cursors past them.
class LaunchBuilder {
 public:
  LaunchBuilder(const Plan& plan, const PositionFor& positionFor, std::map<const void*, int>* laneOfConnector)
      : plan_(plan), positionFor_(positionFor), laneOfConnector_(laneOfConnector) {}

  ncclResult_t addLane(const Lane& lane, int laneId, size_t* cursor, const std::set<size_t>& allowed, bool asBytes,
                       LaunchArrays* out) {
    dev::DevLane dl;
    dl.firstSegment = static_cast<uint32_t>(out->segments.size());
    dl.protocol = lane.proto == Proto::LL ? dev::Protocol::LL : dev::Protocol::Simple;
    uint32_t minSlot = UINT32_MAX, minSlots = UINT32_MAX;
    uint64_t largestStep = 0;  // bytes of the largest step that must fit half a FIFO
    std::vector<int> drains;   // fifos of send ends this lane drains
    for (; *cursor < lane.segments.size() && allowed.count(lane.segments[*cursor].task) != 0; ++*cursor) {
      sched::Segment seg = lane.segments[*cursor];
      if (sched::segmentSteps(seg) == 0) continue;
      const int32_t* planTable = seg.ringTable >= 0 ? plan_.rankTable.data() + seg.ringTable : nullptr;
      largestStep =
          std::max(largestStep, largestHalfFifoStepBytes(seg, planTable, typeSize(plan_.tasks[seg.task].dtype)));
      LaneEnds ends{laneId, lane.proto == Proto::LL, &drains, &minSlot, &minSlots};
      // Zero-copy only where the receiver can read this rank's memory: the
      // send end a zero-copy step uses, as the host executor decides it
      // (step_exec.cc: sendsZeroCopy with its first send's flag).
      if (!firstSendReadsOurBuffers(seg)) seg.flags = static_cast<uint8_t>(seg.flags & ~sched::kSegDirect);
      for (int16_t& c : seg.conn) {
        if (c == sched::kNoConn) continue;
        int idx = 0;
        CHORUS_CHECK(connectorIndex(c, ends, out, &idx));
        c = static_cast<int16_t>(idx);
      }
      if (sched::isWireKind(seg.kind)) {
        CHORUS_CHECK(wireTableIndex(seg, ends, out, &seg.ringTable));
        const int32_t* table = seg.ringTable >= 0 ? out->rankTable.data() + seg.ringTable : nullptr;
        CHORUS_CHECK(checkWirePiece(seg, table, minSlot, laneId));
      } else if (seg.ringTable >= 0) {
        seg.ringTable = ringTableIndex(seg, out);
      }
      if (asBytes) seg = sched::asBytes(seg, typeSize(plan_.tasks[seg.task].dtype));
      seg.task = launchTask(seg.task, out);
      out->segments.push_back(seg);
    }
    dl.nSegments = static_cast<uint32_t>(out->segments.size()) - dl.firstSegment;
    if (dl.nSegments == 0) return ncclSuccess;
    // Every rank's lanes cut their steps into the plan's pieces, which its
    // peer expects slot by slot: a piece that does not fit this lane's
    // smallest slot is refused, never cut smaller here (the peer would not
    // cut alike, and would report every slot as a size mismatch).
    dl.pieceBytes = lane.pieceBytes;
    if (minSlot != UINT32_MAX && devicePieceBytes(lane.proto, lane.pieceBytes, minSlot) != lane.pieceBytes)
      return fail(ncclInternalError,
                  "GPU plan: lane %d moves %s pieces of %u bytes, which do not fit its %u-byte slots (at most %u)",
                  laneId, lane.proto == Proto::LL ? "LL" : "Simple", lane.pieceBytes, minSlot,
                  devicePieceBytes(lane.proto, lane.pieceBytes, minSlot));
    const uint64_t stepPieces = sched::ceilDiv(largestStep, std::max<uint32_t>(1, dl.pieceBytes));
    if (minSlots != UINT32_MAX && stepPieces > std::max<uint32_t>(1, minSlots / 2))
      return fail(ncclInternalError,
                  "GPU plan: lane %d has steps of %llu pieces of %u bytes, more than half of its %u-slot FIFOs "
                  "(the ring would deadlock)",
                  laneId, static_cast<unsigned long long>(stepPieces), dl.pieceBytes, minSlots);
    for (int idx : drains) out->fifos[static_cast<size_t>(idx)].drainBy = static_cast<int8_t>(out->lanes.size());
    out->lanes.push_back(dl);
    return ncclSuccess;
  }

 private:
  // What registering a connector of lane `laneId` updates.
  struct LaneEnds {
    int laneId;
    bool ll;                   // the lane runs the LL protocol
    std::vector<int>* drains;  // fifos of send ends the lane drains
    uint32_t* minSlot;         // the smallest slot of the lane's connectors
    uint32_t* minSlots;        // the fewest slots of the lane's connectors
  };

  // The launch's fifo index of plan connector `conn`, registered for the lane.
  ncclResult_t connectorIndex(int32_t conn, const LaneEnds& ends, LaunchArrays* out, int* idx) {
    if (conn < 0 || static_cast<size_t>(conn) >= plan_.conns.size())
      return fail(ncclInternalError, "GPU plan: lane %d names connector %d of %zu", ends.laneId, conn,
                  plan_.conns.size());
    const ConnRef& ref = plan_.conns[static_cast<size_t>(conn)];
    if (ref.recv == nullptr && ref.send == nullptr)
      return fail(ncclInternalError, "GPU plan: connector %d of lane %d has no end", conn, ends.laneId);
    // An LL sender never advances the FIFO's tail (its lines carry their own
    // flags), and a network link's mover sends only what lies below the tail:
    // LL over the network would wait forever. The tuner keeps LL off such
    // links in GPU mode; a plan that still has one is refused here.
    if (ends.ll && ref.end().health != nullptr)
      return fail(ncclInvalidUsage,
                  "GPU plan: lane %d would run LL over connector %d, a network link to rank %d; in GPU mode network "
                  "links carry the Simple protocol only (do not force NCCL_PROTO=LL across hosts)",
                  ends.laneId, conn, ref.end().peer);
    CHORUS_CHECK(fifoIndex(ref, ends.laneId, out, idx));
    if (ref.send != nullptr && drained(plan_, ref.send)) ends.drains->push_back(*idx);
    *ends.minSlot = std::min(*ends.minSlot, ref.end().slotBytes);
    *ends.minSlots = std::min(*ends.minSlots, ref.end().nslots);
    return ncclSuccess;
  }

  // The launch's copy of a wire segment's rank table (sched::Segment's
  // ringTable for the wire kinds): its connector entries (the first 2n)
  // become fifo indices of the segment's lane; an owner's partial flags (the
  // last n) are copied.
  ncclResult_t wireTableIndex(const sched::Segment& seg, const LaneEnds& ends, LaunchArrays* out, int32_t* at) {
    if (seg.ringTable < 0) return ncclSuccess;  // senders and gatherers have none
    const int n = seg.nranks;
    const bool relay = seg.kind == sched::SegmentKind::WireRelay;
    const size_t entries = static_cast<size_t>(relay ? 2 * n : 3 * n);
    if (n < 1 || n > dev::kWireMaxRanks || static_cast<size_t>(seg.ringTable) + entries > plan_.rankTable.size())
      return fail(ncclInternalError, "GPU plan: a wire table of %d ranks at %d does not fit the plan's %zu entries", n,
                  seg.ringTable, plan_.rankTable.size());
    const int32_t* from = plan_.rankTable.data() + seg.ringTable;
    const size_t connectorEntries = 2 * static_cast<size_t>(n);
    *at = static_cast<int32_t>(out->rankTable.size());
    for (size_t e = 0; e < entries; ++e) {
      int32_t v = from[e];
      if (e < connectorEntries && v != sched::kNoConn) {
        int idx = 0;
        CHORUS_CHECK(connectorIndex(v, ends, out, &idx));
        v = idx;
      }
      out->rankTable.push_back(v);
    }
    return ncclSuccess;
  }

  // A wire piece travels in one slot: what the segment moves for its largest
  // piece (wireSlotBytes) must fit the lane's smallest slot. `table` is the
  // launch's copy of the segment's rank table; a combine's last n entries
  // flag the inputs that arrive as partials.
  ncclResult_t checkWirePiece(const sched::Segment& seg, const int32_t* table, uint32_t minSlot, int laneId) const {
    const Task& t = plan_.tasks[seg.task];
    const uint64_t n = std::min(seg.roundElems, seg.count);
    const bool combines = seg.kind == sched::SegmentKind::WireOwner || seg.kind == sched::SegmentKind::WireHostSum ||
                          seg.kind == sched::SegmentKind::WireChain;
    bool partialIn = false;
    for (int r = 0; combines && table != nullptr && r < seg.nranks; ++r) partialIn |= table[2 * seg.nranks + r] != 0;
    const uint64_t bytes = wireSlotBytes(t, seg.kind, partialIn, n);
    if (seg.roundElems == 0 || (minSlot != UINT32_MAX && bytes > minSlot))
      return fail(ncclInternalError, "GPU plan: lane %d moves wire pieces of %llu bytes through %u-byte slots", laneId,
                  static_cast<unsigned long long>(bytes), minSlot);
    return ncclSuccess;
  }

  // Whether the first send end of `seg` (the one a zero-copy step sends
  // through) lets its receiver read this rank's buffers.
  bool firstSendReadsOurBuffers(const sched::Segment& seg) const {
    const int16_t c = seg.conn[2];
    if (c == sched::kNoConn || static_cast<size_t>(c) >= plan_.conns.size()) return false;
    const ConnRef& ref = plan_.conns[static_cast<size_t>(c)];
    return ref.send != nullptr && ref.end().peerReadsOurBuffers;
  }

  ncclResult_t fifoIndex(const ConnRef& ref, int laneId, LaunchArrays* out, int* idx) {
    const void* connector = ref.recv ? static_cast<const void*>(ref.recv) : static_cast<const void*>(ref.send);
    const FifoEnd& end = ref.end();
    // The kernel finds slot k at slots + k * slotBytes (DevFifo has no
    // stride): a framed end (a header before each slot, net_wire.h) cannot
    // be handed to it.
    if (end.slotStride != 0 && end.slotStride != end.slotBytes)
      return fail(ncclInternalError,
                  "GPU plan: the connector to rank %d keeps %u bytes between %u-byte slots; kernels need them packed",
                  end.peer, end.slotStride, end.slotBytes);
    auto owner = laneOfConnector_->emplace(connector, laneId).first;
    if (owner->second != laneId)
      return fail(ncclInternalError, "GPU plan: a connector to rank %d is used by lanes %d and %d", end.peer,
                  owner->second, laneId);
    auto it = index_.find(connector);
    if (it != index_.end()) {
      *idx = it->second;
      return ncclSuccess;
    }
    uint64_t* position = positionFor_(end, ref.send != nullptr);
    if (position == nullptr)
      return fail(ncclInternalError, "GPU plan: no device position counter for the connector to rank %d", end.peer);
    *idx = static_cast<int>(out->fifos.size());
    index_[connector] = *idx;
    out->fifos.push_back(deviceEnd(end, position));
    return ncclSuccess;
  }

  // The launch's copy of the ring order a segment uses (shared by segments
  // of the same ring).
  int32_t ringTableIndex(const sched::Segment& seg, LaunchArrays* out) {
    auto it = tables_.find(seg.ringTable);
    if (it != tables_.end()) return it->second;
    const auto at = static_cast<int32_t>(out->rankTable.size());
    const int32_t* from = plan_.rankTable.data() + seg.ringTable;
    out->rankTable.insert(out->rankTable.end(), from, from + seg.nranks);
    tables_[seg.ringTable] = at;
    return at;
  }

  const Plan& plan_;
  const PositionFor& positionFor_;
  std::map<const void*, int>* laneOfConnector_;
  std::map<const void*, int> index_;
  std::map<int32_t, int32_t> tables_;
};

// Tasks that are never split at a task boundary: a collective alone, or all
// the point-to-point tasks of the plan (with the all-to-all, gather and
// scatter collectives, which are made of sends and receives). A send and a
// receive of one group may depend on each other (and on other ranks'
// point-to-point operations) in any order, so they must progress together:
// one launch, or launches of whole rounds (translateP2PInRounds). They run
// first, before the collectives, on every rank alike, so no rank waits in a
// collective for data another rank would send only after its own collective.
struct TaskUnit {
  std::vector<size_t> tasks;
  bool p2p = false;
  bool wire = false;  // a direct reduction (docs/wire.md): a launch of its own, run by the wire kernel
};

std::vector<TaskUnit> taskUnits(const std::vector<Task>& tasks) {
  std::vector<TaskUnit> units;
  TaskUnit p2p;
  p2p.p2p = true;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (isPointToPoint(tasks[i].type)) p2p.tasks.push_back(i);
  if (!p2p.tasks.empty()) units.push_back(std::move(p2p));
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!isPointToPoint(tasks[i].type)) units.push_back({{i}, false, tasks[i].wire.active()});
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

bool fits(const LaunchArrays& l, size_t maxLanes) {
  return l.lanes.size() <= maxLanes && l.fifos.size() <= static_cast<size_t>(dev::kLaunchMaxFifos) &&
         l.segments.size() <= static_cast<size_t>(dev::kLaunchMaxSegments) &&
         l.rankTable.size() <= static_cast<size_t>(dev::kLaunchMaxRankTable) &&
         l.tasks.size() <= static_cast<size_t>(dev::kLaunchMaxTasks);
}

// Builds the launch of the tasks of units u..w from `base` cursors; every
// lane (every lane in `only`, when given) takes its steps of those tasks, in
// order.
ncclResult_t tryLaunch(const Plan& plan, const PositionFor& positionFor, const std::vector<TaskUnit>& units, size_t u,
                       size_t w, const Attempt& base, Attempt* out, const std::vector<bool>* only = nullptr) {
  *out = base;
  out->launch = LaunchArrays{};
  std::set<size_t> allowed;
  for (size_t k = u; k <= w; ++k)
    for (size_t t : units[k].tasks) allowed.insert(t);
  const ReduceSpec spec = launchSpecOf(plan.tasks[units[u].tasks[0]], units[u].p2p);
  dev::LaneLaunch& h = out->launch.header;
  h.type = spec.type;
  h.kind = spec.kind;
  h.scalar = spec.scalar;
  h.divisor = spec.divisor;
  out->launch.scalarOnHost = spec.scalarOnHost;
  if (units[u].wire) {
    const Task& t = plan.tasks[units[u].tasks[0]];
    h.wire = true;
    h.wireFormat = t.wire.format;
    h.residual = t.wire.residual;
  }
  LaunchBuilder builder(plan, positionFor, &out->laneOfConnector);
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    if (only == nullptr || (*only)[l])
      CHORUS_CHECK(
          builder.addLane(plan.lanes[l], static_cast<int>(l), &out->cursor[l], allowed, units[u].p2p, &out->launch));
  h.nLanes = static_cast<int>(out->launch.lanes.size());
  h.nSegments = static_cast<int>(out->launch.segments.size());
  h.nFifos = static_cast<int>(out->launch.fifos.size());
  h.nRankTable = static_cast<int>(out->launch.rankTable.size());
  h.nTasks = static_cast<int>(out->launch.tasks.size());
  return ncclSuccess;
}

bool sameLaunchSpec(const Plan& plan, const TaskUnit& a, const TaskUnit& b) {
  if (a.wire || b.wire) return false;  // one task per wire launch: its format and residual are the launch's
  if (a.p2p || b.p2p) return a.p2p && b.p2p;
  return sameSpec(launchSpecOf(plan.tasks[a.tasks[0]], false), launchSpecOf(plan.tasks[b.tasks[0]], false));
}

// The round of a point-to-point lane: with n ranks, rank r sends to peer p
// in round (p - r) mod n and receives from p in round (r - p) mod n, so the
// receive that pairs with a send is in the same round on the peer. Copies to
// itself are round 0.
int p2pRound(const Plan& plan, const sched::Segment& seg) {
  const int n = plan.comm->id.nranks, r = plan.comm->id.rank;
  if (seg.conn[2] != sched::kNoConn) return (plan.conns[static_cast<size_t>(seg.conn[2])].end().peer - r + n) % n;
  if (seg.conn[0] != sched::kNoConn) return (r - plan.conns[static_cast<size_t>(seg.conn[0])].end().peer + n) % n;
  return 0;
}

// The error for round `d` of a point-to-point group that alone does not fit
// one launch (`launch`, as far as it got).
ncclResult_t roundTooLarge(const Plan& plan, int d, const LaunchArrays& launch, size_t maxLanes) {
  const int n = plan.comm->id.nranks, r = plan.comm->id.rank;
  return fail(ncclInvalidUsage,
              "GPU plan: round %d of a group of point-to-point operations (the sends to rank %d and receives from "
              "rank %d) needs %zu lanes, %zu connector ends, %zu segments and %zu tasks in one kernel launch; it "
              "holds %zu, %d, %d and %d",
              d, (r + d) % n, (r - d + n) % n, launch.lanes.size(), launch.fifos.size(), launch.segments.size(),
              launch.tasks.size(), maxLanes, dev::kLaunchMaxFifos, dev::kLaunchMaxSegments, dev::kLaunchMaxTasks);
}

// A group of point-to-point operations too large for one launch (an
// all-to-all of many ranks) runs as several, each holding whole rounds, in
// increasing round order. Ranks may cut at different rounds and still never
// wait for each other forever: the lowest round not yet done is in the
// running launch of every rank with a part in it, and a launch's lanes
// progress independently.
ncclResult_t translateP2PInRounds(const Plan& plan, const PositionFor& positionFor, const std::vector<TaskUnit>& units,
                                  size_t u, size_t maxLanes, Attempt* done, std::vector<LaunchArrays>* out) {
  const std::set<size_t> unit(units[u].tasks.begin(), units[u].tasks.end());
  std::map<int, std::vector<size_t>> lanesOfRound;
  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    const size_t at = done->cursor[l];
    const std::vector<sched::Segment>& segs = plan.lanes[l].segments;
    if (at < segs.size() && unit.count(segs[at].task) != 0) lanesOfRound[p2pRound(plan, segs[at])].push_back(l);
  }
  for (auto next = lanesOfRound.begin(); next != lanesOfRound.end();) {
    std::vector<bool> only(plan.lanes.size(), false);
    Attempt best;
    bool any = false;
    for (; next != lanesOfRound.end(); ++next) {
      for (size_t l : next->second) only[l] = true;
      Attempt bigger;
      CHORUS_CHECK(tryLaunch(plan, positionFor, units, u, u, *done, &bigger, &only));
      if (!fits(bigger.launch, maxLanes)) {
        if (!any) return roundTooLarge(plan, next->first, bigger.launch, maxLanes);
        break;
      }
      best = std::move(bigger);
      any = true;
    }
    done->cursor = best.cursor;
    done->laneOfConnector = best.laneOfConnector;
    out->push_back(std::move(best.launch));
  }
  return ncclSuccess;
}

}  // namespace

dev::LaneLaunch launchHeader(const Plan& plan, const LaunchArrays& la, OpPrint* prints) {
  dev::LaneLaunch L = la.header;
  // The sequence numbers change per call; the translated launch does not.
  L.nTasks = plan.stamps.size() == plan.tasks.size() ? static_cast<int>(la.tasks.size()) : 0;
  for (int k = 0; k < L.nTasks; ++k) prints[k] = plan.stamps[la.tasks[static_cast<size_t>(k)]].mine;
  L.prints = prints;
  L.rank = plan.comm->id.rank;
  L.lanes = la.lanes.data();
  L.segments = la.segments.data();
  L.fifos = la.fifos.data();
  L.rankTable = la.rankTable.data();
  if (la.scalarOnHost) {
    std::memcpy(&L.scalarBits, la.header.scalar, typeSize(la.header.type));
    L.scalar = nullptr;
  }
  return L;
}

uint32_t devicePieceBytes(Proto proto, size_t lanePieceBytes, uint32_t slotBytes) {
  const uint32_t piece = static_cast<uint32_t>(std::min<size_t>(lanePieceBytes, slotBytes));
  if (proto != Proto::LL) return piece;
  return std::min(dev::llPieceBytes(slotBytes), piece);
}

ncclResult_t translatePlan(const Plan& plan, const PositionFor& positionFor, std::vector<LaunchArrays>* out,
                           size_t maxLanes) {
  out->clear();
  maxLanes = std::clamp<size_t>(maxLanes, 1, kMaxLanesPerLaunch);
  const std::vector<TaskUnit> units = taskUnits(plan.tasks);
  Attempt done;
  done.cursor.assign(plan.lanes.size(), 0);
  for (size_t u = 0; u < units.size();) {
    // Grow the launch unit by unit while the spec stays the same and it fits.
    Attempt best;
    size_t last = u;
    CHORUS_CHECK(tryLaunch(plan, positionFor, units, u, u, done, &best));
    if (!fits(best.launch, maxLanes) && units[u].p2p && plan.comm != nullptr) {
      CHORUS_CHECK(translateP2PInRounds(plan, positionFor, units, u, maxLanes, &done, out));
      ++u;
      continue;
    }
    if (!fits(best.launch, maxLanes))
      return fail(ncclInvalidUsage,
                  "GPU plan: %s of %zu task(s) needs %zu lanes, %zu connector ends, %zu segments and %zu ring-table "
                  "entries in one kernel launch; a launch holds %zu, %d, %d and %d, and %d tasks (split the group of "
                  "operations)",
                  units[u].p2p ? "a group of point-to-point operations" : collName(plan.tasks[units[u].tasks[0]].type),
                  units[u].tasks.size(), best.launch.lanes.size(), best.launch.fifos.size(),
                  best.launch.segments.size(), best.launch.rankTable.size(), maxLanes, dev::kLaunchMaxFifos,
                  dev::kLaunchMaxSegments, dev::kLaunchMaxRankTable, dev::kLaunchMaxTasks);
    for (size_t w = u + 1; w < units.size() && sameLaunchSpec(plan, units[u], units[w]); ++w) {
      Attempt bigger;
      CHORUS_CHECK(tryLaunch(plan, positionFor, units, u, w, done, &bigger));
      if (!fits(bigger.launch, maxLanes)) break;
      best = std::move(bigger);
      last = w;
    }
    done.cursor = best.cursor;
    done.laneOfConnector = best.laneOfConnector;
    if (!best.launch.lanes.empty()) out->push_back(std::move(best.launch));
    u = last + 1;
  }
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    if (done.cursor[l] != plan.lanes[l].segments.size())
      return fail(ncclInternalError, "GPU plan: lane %zu has segments out of task order or of no task of the plan", l);
  return ncclSuccess;
}

}  // namespace chorus::gpu
