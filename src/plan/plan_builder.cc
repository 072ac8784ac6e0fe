#include "plan/plan_builder.h"

#include <algorithm>

#include "core/comm.h"
#include "core/registration.h"
#include "core/result.h"
#include "kernels/lane_plan.h"
#include "transport/connection_table.h"

namespace chorus {

PlanContext planContextOf(ncclComm* comm) {
  PlanContext c;
  c.rank = comm->id.rank;
  c.nranks = comm->id.nranks;
  c.config = &comm->config;
  const graph::CommGraph* g = comm->graph.get();
  c.graph = g != nullptr && g->nranks == c.nranks && g->nchannels() > 0 ? g : nullptr;
  c.registrations = &comm->registrations;
  c.conns = comm->conns.get();
  c.hostMode = comm->id.hostMode;
  return c;
}

PlanBuilder::PlanBuilder(const PlanContext& ctx, Plan* plan) : ctx_(ctx), plan_(plan) {}

int PlanBuilder::rank() const { return ctx_.rank; }
int PlanBuilder::nranks() const { return ctx_.nranks; }

uint32_t PlanBuilder::slotBytes(ConnClass cls, Proto p) const {
  if (p == Proto::LL) return ctx_.config->llSlotBytes;
  return cls == ConnClass::P2P ? ctx_.config->slotBytes : ctx_.config->collSlotBytes;
}

uint32_t PlanBuilder::pieceBytes(ConnClass cls, Proto p) const {
  const uint32_t slot = slotBytes(cls, p);
  return !ctx_.hostMode && p == Proto::LL ? dev::llPieceBytes(slot) : slot;
}

uint32_t PlanBuilder::nslots() const { return ctx_.config->nslots; }

const CommConfig& PlanBuilder::config() const { return *ctx_.config; }

bool PlanBuilder::zeroCopySource(const void* p, size_t bytes) const {
  return ctx_.config->localRegister && bytes > 0 && ctx_.registrations != nullptr &&
         ctx_.registrations->covers(p, bytes);
}

const graph::CommGraph* PlanBuilder::graph() const { return ctx_.graph; }

RingOrder PlanBuilder::ringOrder(int channel) const {
  const graph::CommGraph* g = graph();
  if (g == nullptr) return RingOrder{};
  const graph::RingChannel& ring = g->ring(channel);
  return RingOrder{ring.order.data(), ring.position.data()};
}

Lane& PlanBuilder::lane(ConnClass cls, Proto proto, int channel, int peer, bool sendSide) {
  auto key = std::make_tuple(static_cast<int>(cls), static_cast<int>(proto), channel, peer, sendSide ? 1 : 0);
  auto it = laneIndex_.find(key);
  if (it != laneIndex_.end()) return plan_->lanes[it->second];
  laneIndex_[key] = plan_->lanes.size();
  plan_->lanes.emplace_back();
  plan_->lanes.back().pieceBytes = pieceBytes(cls, proto);
  plan_->lanes.back().proto = proto;
  return plan_->lanes.back();
}

int16_t PlanBuilder::connId(RecvConnector* recv, SendConnector* send) {
  const void* key = recv ? static_cast<const void*>(recv) : static_cast<const void*>(send);
  auto it = connIds_.find(key);
  if (it != connIds_.end()) return it->second;
  const auto id = static_cast<int16_t>(plan_->conns.size());
  plan_->conns.push_back(ConnRef{recv, send});
  connIds_[key] = id;
  return id;
}

ncclResult_t PlanBuilder::recvFrom(ConnClass cls, Proto proto, int channel, int peer, int16_t* id) {
  ConnKey key{cls, static_cast<uint8_t>(proto), static_cast<uint16_t>(channel), peer};
  RecvConnector* c = nullptr;
  CHORUS_CHECK(ctx_.conns->requestRecv(key, slotBytes(cls, proto), nslots(), &c));
  *id = connId(c, nullptr);
  return ncclSuccess;
}

ncclResult_t PlanBuilder::sendTo(ConnClass cls, Proto proto, int channel, int peer, int16_t* id) {
  ConnKey key{cls, static_cast<uint8_t>(proto), static_cast<uint16_t>(channel), peer};
  SendConnector* c = nullptr;
  CHORUS_CHECK(ctx_.conns->requestSend(key, slotBytes(cls, proto), nslots(), &c));
  *id = connId(nullptr, c);
  return ncclSuccess;
}

ncclResult_t PlanBuilder::connect(const ConnKey& key, bool send, uint32_t slotBytes, uint32_t nslots, int16_t* id) {
  if (send) {
    SendConnector* c = nullptr;
    CHORUS_CHECK(ctx_.conns->requestSend(key, slotBytes, nslots, &c));
    *id = connId(nullptr, c);
  } else {
    RecvConnector* c = nullptr;
    CHORUS_CHECK(ctx_.conns->requestRecv(key, slotBytes, nslots, &c));
    *id = connId(c, nullptr);
  }
  return ncclSuccess;
}

sched::Segment PlanBuilder::segment(const Task& t, sched::SegmentKind kind) const {
  sched::Segment s;
  s.kind = kind;
  s.task = static_cast<uint16_t>(&t - plan_->tasks.data());
  s.src = t.sendbuff;
  s.dst = t.recvbuff;
  return s;
}

sched::Segment PlanBuilder::local(const Task& t, const void* src, void* dst, size_t count, bool pre, bool post) const {
  sched::Segment s = segment(t, sched::SegmentKind::Single);
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.flags = static_cast<uint8_t>((src ? sched::kSegHasSrc : 0) | (dst ? sched::kSegHasDst : 0) |
                                 (pre ? sched::kSegPreSrc : 0) | (post ? sched::kSegPost : 0));
  return s;
}

int32_t PlanBuilder::addRingTable(const RingOrder& ring) {
  if (ring.order == nullptr) return -1;
  std::vector<int32_t> order(static_cast<size_t>(nranks()));
  for (int p = 0; p < nranks(); ++p) order[static_cast<size_t>(p)] = ring.at(p);
  auto [it, added] = ringTables_.try_emplace(std::move(order), static_cast<int32_t>(plan_->rankTable.size()));
  if (added) plan_->rankTable.insert(plan_->rankTable.end(), it->first.begin(), it->first.end());
  return it->second;
}

int32_t PlanBuilder::addTableEntries(const int32_t* entries, int n) {
  const auto at = static_cast<int32_t>(plan_->rankTable.size());
  plan_->rankTable.insert(plan_->rankTable.end(), entries, entries + n);
  return at;
}

ncclResult_t PlanBuilder::expand(const Task& task, const TuneDecision& d) {
  if (isPointToPoint(task.type)) return expandP2P(*this, task, &selfSends_, &selfRecvs_);
  if (task.wire.active()) return expandWire(*this, task);
  if (nranks() == 1) return expandLocal(*this, task);
  if (d.algo == Algo::Tree) return expandTree(*this, task, d);
  if (d.algo == Algo::Direct) return expandDirect(*this, task, d);
  if (d.algo == Algo::Hier) return expandHier(*this, task, d);
  return expandRing(*this, task, d);
}

// A send to self and a receive from self pair up in call order, like any
// other send/receive pair, and become one local copy, as bytes (the two
// sides may name different but same-sized types).
ncclResult_t PlanBuilder::pairSelfCopies() {
  if (selfSends_.size() != selfRecvs_.size())
    return fail(ncclInvalidUsage, "rank %d: %zu sends to itself but %zu receives from itself in one group", rank(),
                selfSends_.size(), selfRecvs_.size());
  for (size_t i = 0; i < selfSends_.size(); ++i) {
    const Task& s = *selfSends_[i];
    const Task& r = *selfRecvs_[i];
    if (s.count * typeSize(s.dtype) != r.count * typeSize(r.dtype))
      return fail(ncclInvalidUsage, "rank %d: send to itself of %zu bytes does not match receive of %zu bytes", rank(),
                  s.count * typeSize(s.dtype), r.count * typeSize(r.dtype));
    if (s.count == 0) continue;
    const sched::Segment copy = local(r, s.sendbuff, r.recvbuff, r.count, false, false);
    lane(ConnClass::P2P, Proto::Simple, 0, rank(), false).segments.push_back(sched::asBytes(copy, typeSize(r.dtype)));
  }
  return ncclSuccess;
}

// Outputs at least this large are written with non-temporal stores: they
// cannot stay in cache anyway, and skipping the read-for-ownership saves a
// third of the DRAM traffic of the final copies.
constexpr size_t kStreamOutputBytes = 4u << 20;

void PlanBuilder::markStreamingOutputs() {
  for (Lane& lane : plan_->lanes)
    for (sched::Segment& s : lane.segments)
      if (taskBytes(plan_->tasks[s.task], nranks()) >= kStreamOutputBytes)
        s.flags = static_cast<uint8_t>(s.flags | sched::kSegStream);
}

ncclResult_t PlanBuilder::build() {
  plan_->estimatedUs = 0;
  // Before any covers(): a later change only rebuilds.
  plan_->registrationEpoch = ctx_.registrations ? ctx_.registrations->epoch() : 0;
  if (plan_->tasks.size() > UINT16_MAX)
    return fail(ncclInvalidUsage, "rank %d: a group of %zu operations; at most %u fit one plan", rank(),
                plan_->tasks.size(), static_cast<unsigned>(UINT16_MAX));
  for (const Task& task : plan_->tasks) {
    if (task.wire.active() && !isPointToPoint(task.type)) {
      CHORUS_CHECK(expand(task, TuneDecision{}));  // the format and algorithm are the caller's, not the tuner's
      continue;
    }
    TuneDecision d;
    CHORUS_CHECK(tuneTask(task, nranks(), *ctx_.config, graph(), &d));
    plan_->estimatedUs += d.estimatedUs;
    CHORUS_CHECK(expand(task, d));
  }
  CHORUS_CHECK(pairSelfCopies());
  markStreamingOutputs();
  return ncclSuccess;
}

ncclResult_t expandLocal(PlanBuilder& b, const Task& t) {
  const bool reduces = t.type == CollType::AllReduce || t.type == CollType::Reduce || t.type == CollType::ReduceScatter;
  if (t.count == 0 || (t.sendbuff == t.recvbuff && !reduces)) return ncclSuccess;
  b.lane(ConnClass::Ring, Proto::Simple, 0)
      .segments.push_back(b.local(t, t.sendbuff, t.recvbuff, t.count, reduces, reduces));
  return ncclSuccess;
}

const ReduceSpec& segmentSpec(const Plan& plan, const sched::Segment& s) {
  static const ReduceSpec kBytes{ncclUint8, ReduceKind::Sum, nullptr, 1, false};
  return (s.flags & sched::kSegBytes) ? kBytes : plan.tasks[s.task].spec;
}

size_t planFootprintBytes(const Plan& plan) {
  size_t bytes = sizeof(Plan) + plan.tasks.size() * sizeof(Task) + plan.conns.size() * sizeof(ConnRef) +
                 plan.rankTable.size() * sizeof(int32_t);
  for (const Lane& lane : plan.lanes) bytes += sizeof(Lane) + lane.segments.size() * sizeof(sched::Segment);
  return bytes;
}

}  // namespace chorus
