#include "gpu/lane_translate.h"

#include <algorithm>
#include <cstddef>
#include <map>

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

  ncclResult_t addLane(const Lane& lane, int laneId, size_t* cursor, const ReduceSpec& spec, LaunchArrays* out) {
    dev::DevLane dl;
    dl.firstStep = static_cast<uint32_t>(out->steps.size());
    dl.protocol = lane.proto == Proto::LL ? dev::Protocol::LL : dev::Protocol::Simple;
    uint32_t minSlot = UINT32_MAX;
    for (; *cursor < lane.steps.size() && sameSpec(*lane.steps[*cursor].spec, spec); ++*cursor) {
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
      d.preSrc = h.preSrc;
      d.post = h.post;
      d.src = h.src;
      d.dst = h.dst;
      d.count = h.count;
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

}  // namespace

uint32_t devicePieceBytes(Proto proto, size_t lanePieceBytes, uint32_t slotBytes) {
  const uint32_t piece = static_cast<uint32_t>(std::min<size_t>(lanePieceBytes, slotBytes));
  if (proto != Proto::LL) return piece;
  return std::min({dev::llPayloadBytes(slotBytes), dev::kLLMaxPieceBytes, piece});
}

ncclResult_t translatePlan(const HostPlan& plan, const PositionFor& positionFor, std::vector<LaunchArrays>* out) {
  out->clear();
  std::vector<size_t> cursor(plan.lanes.size(), 0);
  std::map<const void*, int> laneOfConnector;
  for (;;) {
    // The next spec: the first unconsumed step of the lowest-numbered task.
    const ReduceSpec* spec = nullptr;
    for (const Task& t : plan.tasks) {
      for (size_t l = 0; l < plan.lanes.size() && spec == nullptr; ++l)
        if (cursor[l] < plan.lanes[l].steps.size() && plan.lanes[l].steps[cursor[l]].spec == &t.spec) spec = &t.spec;
      if (spec != nullptr) break;
    }
    if (spec == nullptr) break;
    LaunchArrays launch;
    launch.header.type = spec->type;
    launch.header.kind = spec->kind;
    launch.header.scalar = spec->scalar;
    launch.header.divisor = spec->divisor;
    LaunchBuilder builder(positionFor, &laneOfConnector);
    for (size_t l = 0; l < plan.lanes.size(); ++l)
      CHORUS_CHECK(builder.addLane(plan.lanes[l], static_cast<int>(l), &cursor[l], *spec, &launch));
    if (launch.lanes.size() > kMaxLanesPerLaunch)
      return fail(ncclInternalError, "GPU plan: %zu lanes in one launch (at most %zu)", launch.lanes.size(),
                  kMaxLanesPerLaunch);
    launch.header.nLanes = static_cast<int>(launch.lanes.size());
    if (!launch.lanes.empty()) out->push_back(std::move(launch));
  }
  for (size_t l = 0; l < plan.lanes.size(); ++l)
    if (cursor[l] != plan.lanes[l].steps.size())
      return fail(ncclInternalError, "GPU plan: lane %zu has steps of no task of the plan", l);
  return ncclSuccess;
}

}  // namespace chorus::gpu
