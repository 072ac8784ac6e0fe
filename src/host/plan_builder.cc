#include "host/plan_builder.h"

#include <algorithm>

#include "core/comm.h"
#include "core/result.h"

namespace chorus {

PlanBuilder::PlanBuilder(ncclComm* comm, HostPlan* plan) : comm_(comm), plan_(plan) {}

int PlanBuilder::rank() const { return comm_->id.rank; }
int PlanBuilder::nranks() const { return comm_->id.nranks; }
uint32_t PlanBuilder::slotBytes(Proto p) const {
  return p == Proto::LL ? comm_->config.llSlotBytes : comm_->config.slotBytes;
}
uint32_t PlanBuilder::nslots() const { return comm_->config.nslots; }
bool PlanBuilder::zeroCopySource(const void* p, size_t bytes) const {
  return comm_->config.localRegister && bytes > 0 && comm_->registrations.covers(p, bytes);
}
const graph::CommGraph* PlanBuilder::graph() const {
  const graph::CommGraph* g = comm_->graph.get();
  return g != nullptr && g->nranks == nranks() && g->nchannels() > 0 ? g : nullptr;
}

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
  plan_->lanes.back().pieceBytes = slotBytes(proto);
  plan_->lanes.back().proto = proto;
  return plan_->lanes.back();
}

ncclResult_t PlanBuilder::recvFrom(ConnClass cls, Proto proto, int channel, int peer, RecvConnector** out) {
  ConnKey key{cls, static_cast<uint8_t>(proto), static_cast<uint16_t>(channel), peer};
  return comm_->conns->requestRecv(key, slotBytes(proto), nslots(), out);
}

ncclResult_t PlanBuilder::sendTo(ConnClass cls, Proto proto, int channel, int peer, SendConnector** out) {
  ConnKey key{cls, static_cast<uint8_t>(proto), static_cast<uint16_t>(channel), peer};
  return comm_->conns->requestSend(key, slotBytes(proto), nslots(), out);
}

HostStep localStep(const Task& t, const char* src, char* dst, size_t count, bool pre, bool post) {
  HostStep s;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.preSrc = pre;
  s.post = post;
  s.spec = &t.spec;
  return s;
}

ncclResult_t PlanBuilder::expand(const Task& task, const TuneDecision& d) {
  if (task.type == CollType::Send || task.type == CollType::Recv || task.type == CollType::AlltoAll ||
      task.type == CollType::Gather || task.type == CollType::Scatter)
    return expandP2P(*this, task, &selfSends_, &selfRecvs_);
  if (nranks() == 1) return expandLocal(*this, task);
  if (d.algo == Algo::Tree) return expandTree(*this, task, d);
  if (d.algo == Algo::Direct) return expandDirect(*this, task, d);
  if (d.algo == Algo::Hier) return expandHier(*this, task, d);
  return expandRing(*this, task, d);
}

// A send to self and a receive from self pair up in call order, like any
// other send/receive pair, and become one local copy.
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
    // Copy as bytes (the two sides may name different but same-sized types).
    Task& owner = const_cast<Task&>(r);
    owner.spec.type = ncclUint8;
    owner.spec.kind = ReduceKind::Sum;
    HostStep step = localStep(owner, static_cast<const char*>(s.sendbuff), static_cast<char*>(r.recvbuff),
                              r.count * typeSize(r.dtype), false, false);
    lane(ConnClass::P2P, Proto::Simple, 0, rank(), false).steps.push_back(step);
  }
  return ncclSuccess;
}

// Outputs at least this large are written with non-temporal stores: they
// cannot stay in cache anyway, and skipping the read-for-ownership saves a
// third of the DRAM traffic of the final copies.
constexpr size_t kStreamOutputBytes = 4u << 20;

void PlanBuilder::markStreamingOutputs() {
  std::vector<const ReduceSpec*> large;
  for (const Task& t : plan_->tasks)
    if (taskBytes(t, nranks()) >= kStreamOutputBytes) large.push_back(&t.spec);
  if (large.empty()) return;
  for (Lane& lane : plan_->lanes)
    for (HostStep& s : lane.steps)
      s.streamDst = s.dst != nullptr && std::find(large.begin(), large.end(), s.spec) != large.end();
}

ncclResult_t PlanBuilder::build() {
  plan_->estimatedUs = 0;
  plan_->registrationEpoch = comm_->registrations.epoch();  // before any covers(): a later change only rebuilds
  for (const Task& task : plan_->tasks) {
    TuneDecision d;
    CHORUS_CHECK(tuneTask(task, nranks(), comm_->config, graph(), &d));
    plan_->estimatedUs += d.estimatedUs;
    CHORUS_CHECK(expand(task, d));
  }
  CHORUS_CHECK(pairSelfCopies());
  markStreamingOutputs();
  return ncclSuccess;
}

ncclResult_t expandLocal(PlanBuilder& b, const Task& t) {
  const char* src = static_cast<const char*>(t.sendbuff);
  char* dst = static_cast<char*>(t.recvbuff);
  const bool reduces = t.type == CollType::AllReduce || t.type == CollType::Reduce || t.type == CollType::ReduceScatter;
  if (t.count == 0 || (src == dst && !reduces)) return ncclSuccess;
  b.lane(ConnClass::Ring, Proto::Simple, 0).steps.push_back(localStep(t, src, dst, t.count, reduces, reduces));
  return ncclSuccess;
}

}  // namespace chorus
