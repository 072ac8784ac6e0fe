// One piece of one step: the data path of host mode. Every decision (which
// step comes next, piece sizes, the combine case, what a received slot holds,
// zero-copy, failure records) is taken by the shared code of
// src/sched/segment.h and kernels/common/step_rules.h, which the lane kernel
// calls too; what is here is how a CPU thread moves the bytes.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/comm.h"
#include "core/result.h"
#include "host/executor.h"
#include "host/host_reduce.h"
#include "host/stream_copy.h"
#include "host/wire_exec.h"
#include "kernels/common/step_rules.h"
#include "plan/lane_failure.h"

namespace chorus {
namespace {

using step::Combine;

// The stamp of a plan made without stampPlan (unit tests): no fingerprint.
const OpStamp kUnstamped{};

// Offers `in` the output addresses of a step's pieces, the first being
// sequence number `firstSeq`, as far as the FIFO window lets it
// (RecvConnector::offerLanding).
void offerStep(RecvConnector* in, uint64_t firstSeq, char* out, uint64_t count, uint64_t pieceElems,
               uint32_t elemBytes) {
  const uint64_t window = in->head() + in->end().nslots;
  for (uint64_t off = 0, seq = firstSeq; off < count && seq < window; off += pieceElems, ++seq) {
    const uint64_t n = count - off < pieceElems ? count - off : pieceElems;
    in->offerLanding(seq, out + off * elemBytes, n * elemBytes);
  }
}

// When a step is loaded: the link may land its received pieces in the
// output, and the next step's too, whose first pieces the link is about to
// read while this step runs (a ring's all-gather piece arrives while this
// rank still reduces).
void offerLandings(const Plan& plan, const Lane& lane) {
  const ActiveStep& a = lane.active;
  if (a.landsInOutput) offerStep(a.recv[0], a.recv[0]->head(), a.dst, a.desc.count, a.pieceElems, a.elemBytes);
  size_t seg = lane.seg;
  uint64_t step = lane.step + 1;
  if (step >= sched::segmentSteps(lane.segments[seg])) {
    if (++seg >= lane.segments.size()) return;
    step = 0;
  }
  if (lane.proto != Proto::Simple) return;  // small pieces: a copy costs less than the offers
  const sched::Segment& s = lane.segments[seg];
  const sched::StepDesc next = sched::segmentStep(s, plan.ringTableOf(s), step);
  if (next.nRecv != 1 || !step::hasOutput(next)) return;
  RecvConnector* in = plan.conns[next.recv[0]].recv;
  if (in->end().landings == nullptr) return;
  const ReduceSpec& spec = segmentSpec(plan, s);
  const bool sendsFromOutput = next.nSend == 1 && plan.conns[next.send[0]].send->end().sendsUserMemory;
  if (!step::landsInOutput(next, spec.kind, step::sendSource(next, spec.kind, sendsFromOutput))) return;
  const auto elemBytes = static_cast<uint32_t>(typeSize(spec.type));
  uint64_t firstSeq = in->head();
  for (int i = 0; i < a.desc.nRecv; ++i)  // this step's pieces from `in` come first
    if (a.recv[i] == in) firstSeq += (a.desc.count + a.pieceElems - 1) / a.pieceElems;
  offerStep(in, firstSeq, static_cast<char*>(s.dst) + next.dstOff * elemBytes, next.count,
            step::pieceElems(next, lane.pieceBytes, elemBytes), elemBytes);
}

// Resolves step (lane.seg, lane.step) into lane.active.
void loadStep(const Plan& plan, Lane& lane) {
  const sched::Segment& seg = lane.segments[lane.seg];
  ActiveStep& a = lane.active;
  a.desc = sched::segmentStep(seg, plan.ringTableOf(seg), lane.step);
  const sched::StepDesc& d = a.desc;
  a.spec = &segmentSpec(plan, seg);
  a.stamp = seg.task < plan.stamps.size() ? &plan.stamps[seg.task] : &kUnstamped;
  a.elemBytes = static_cast<uint32_t>(typeSize(a.spec->type));
  for (int i = 0; i < 2; ++i) {
    a.recv[i] = i < d.nRecv ? plan.conns[d.recv[i]].recv : nullptr;
    a.send[i] = i < d.nSend ? plan.conns[d.send[i]].send : nullptr;
  }
  const char* in = static_cast<const char*>(step::inputBuffer(d, seg.src, seg.dst));
  a.src = in ? in + d.srcOff * a.elemBytes : nullptr;
  a.dst = step::hasOutput(d) ? static_cast<char*>(seg.dst) + d.dstOff * a.elemBytes : nullptr;
  a.streamDst = (seg.flags & sched::kSegStream) != 0 && a.dst != nullptr;
  a.zeroCopy = step::sendsZeroCopy(d, d.nSend == 1 && a.send[0]->end().peerReadsOurBuffers);
  a.sendFrom = step::sendSource(d, a.spec->kind, d.nSend == 1 && a.send[0]->end().sendsUserMemory);
  a.pieceElems = step::pieceElems(d, lane.pieceBytes, a.elemBytes);
  a.combine = step::combinePlan(d);
  a.landsInOutput = lane.proto == Proto::Simple && d.nRecv == 1 && a.recv[0]->end().landings != nullptr &&
                    step::landsInOutput(d, a.spec->kind, a.sendFrom);
  lane.loaded = true;
  offerLandings(plan, lane);
}

// Moves the cursor past finished (and empty) steps; false when the lane is done.
bool settle(const Plan& plan, Lane& lane) {
  for (;;) {
    if (lane.stepsDone()) return false;
    if (!lane.loaded) {
      if (lane.step >= sched::segmentSteps(lane.segments[lane.seg])) {
        ++lane.seg;
        lane.step = 0;
        continue;
      }
      loadStep(plan, lane);
      lane.done = 0;
    }
    if (lane.done < lane.active.desc.count) return true;
    ++lane.step;
    lane.loaded = false;
  }
}

int laneIndex(const Plan& plan, const Lane& lane) { return static_cast<int>(&lane - plan.lanes.data()); }

// Where a stage's operand is (step_rules.h's combinePlan); the partial value
// of a two-stage combination is kept in `target`.
const char* operandAt(const ActiveStep& a, step::Operand o, const char* src, const char* target) {
  switch (o) {
    case step::Operand::Input:
      return src;
    case step::Operand::Recv0:
      return a.recv[0]->slot();
    case step::Operand::Recv1:
      return a.recv[1]->slot();
    case step::Operand::Partial:
      return target;
    case step::Operand::None:
      break;
  }
  return nullptr;
}

// Computes the piece into `target`, stage by stage.
void combine(const ActiveStep& a, char* target, const char* src, size_t n) {
  for (int i = 0; i < a.combine.stages; ++i) {
    const step::CombineStage& st = a.combine.stage[i];
    const char* first = operandAt(a, st.a, src, target);
    if (st.b == step::Operand::None)
      host::transform(*a.spec, target, first, st.preA, n, st.post);
    else
      host::reduce(*a.spec, target, first, st.preA, operandAt(a, st.b, src, target), st.preB, n, st.post);
  }
}

enum class Ready { No, Yes, Descriptor, Failed };

// A received slot of another operation: the error, and the verdict left on
// every connector of the plan so the sender and the other neighbours stop too.
ncclResult_t opMismatchError(const Plan& plan, int lane, int peer, const OpStamp& stamp, const OpPrint& got) {
  const int rank = plan.comm ? plan.comm->id.rank : -1;
  const step::LaneFailure f = step::opMismatch(lane, rank, peer, stamp.mine, got);
  spreadMismatch(plan, f.mismatch);
  return laneFailureError(f, rank, 0);
}

// Whether every connector of the step is ready for a piece of `bytes`.
Ready connectorsReady(const Plan& plan, const Lane& lane, uint32_t bytes, ncclResult_t* err) {
  const ActiveStep& a = lane.active;
  for (int i = 0; i < a.desc.nRecv; ++i) {
    if (!a.recv[i]->ready()) return Ready::No;
    if (!step::printMatches(a.recv[i]->print(), a.stamp->expect)) {
      *err = opMismatchError(plan, laneIndex(plan, lane), a.recv[i]->end().peer, *a.stamp, a.recv[i]->print());
      return Ready::Failed;
    }
    switch (step::classifySlot(a.desc, a.recv[i]->size(), bytes)) {
      case step::SlotHolds::Piece:
        break;
      case step::SlotHolds::Descriptor:
        return Ready::Descriptor;
      case step::SlotHolds::Mismatch:
        *err =
            laneFailureError(step::sizeMismatch(laneIndex(plan, lane), a.recv[i]->end().peer, a.recv[i]->size(), bytes),
                             plan.comm ? plan.comm->id.rank : -1, 0);
        return Ready::Failed;
    }
  }
  for (int i = 0; i < a.desc.nSend; ++i)
    if (!a.send[i]->ready()) return Ready::No;
  return Ready::Yes;
}

// A zero-copy send step (kernels/common/direct_slot.h): posts the descriptor
// of the whole step once, then finishes when the receiver has freed it, i.e.
// has copied the data out of our buffer.
bool progressDirectSend(Lane& lane) {
  ActiveStep& a = lane.active;
  SendConnector* out = a.send[0];
  if (!lane.awaitingReader) {
    if (!out->ready()) return false;
    const DirectDescriptor d{reinterpret_cast<uintptr_t>(a.src), a.desc.count * a.elemBytes, 0};
    std::memcpy(out->slot(), &d, sizeof(d));
    out->post(kDirectSlotMarker, a.stamp->mine);
    lane.awaitingReader = true;
    lane.readerCopied = 0;
    return true;
  }
  if (!out->drained()) {
    // The slot was posted by this lane and is not freed yet: it still holds
    // our descriptor, whose `copied` the reader advances.
    auto* posted = reinterpret_cast<DirectDescriptor*>(out->lastPostedSlot());
    const uint64_t copied = std::atomic_ref<uint64_t>(posted->copied).load(std::memory_order_relaxed);
    if (copied == lane.readerCopied) return false;
    lane.readerCopied = copied;  // the reader is moving: counts as progress
    return true;
  }
  lane.awaitingReader = false;
  lane.done = a.desc.count;
  return true;
}

// The receiving side of a zero-copy send: the whole step copied straight
// from the sender's buffer, if step_rules.h's checkDescriptor accepts it.
bool receiveDirect(const Plan& plan, Lane& lane, ncclResult_t* err) {
  ActiveStep& a = lane.active;
  RecvConnector* in = a.recv[0];
  auto* d = reinterpret_cast<DirectDescriptor*>(const_cast<char*>(in->slot()));
  const step::DescriptorCheck check = step::checkDescriptor(a.desc, lane.done, d->bytes, a.elemBytes);
  if (check != step::DescriptorCheck::Ok) {
    const uint64_t expected = (a.desc.count - lane.done) * a.elemBytes;
    *err = laneFailureError(step::descriptorMismatch(laneIndex(plan, lane), in->end().peer, check, d->bytes, expected),
                            plan.comm ? plan.comm->id.rank : -1, 0);
    return false;
  }
  // In chunks, publishing progress for the sender, which waits meanwhile.
  const char* from = reinterpret_cast<const char*>(static_cast<uintptr_t>(d->address));
  const uint64_t total = d->bytes;
  for (uint64_t off = 0; off < total;) {
    const uint64_t n = step::directChunk(off, total);
    if (a.streamDst)
      host::streamCopy(a.dst + off, from + off, n);
    else
      std::memcpy(a.dst + off, from + off, n);
    off += n;
    std::atomic_ref<uint64_t>(d->copied).store(off, std::memory_order_relaxed);
  }
  in->release();
  lane.done = a.desc.count;
  return true;
}

// A piece the send end takes from this rank's memory (step_rules.h's
// sendSource): computed into the output first, or the input itself when the
// step only copies it. The slot carries where the piece is.
void postFromUserMemory(Lane& lane, const char* src, char* dst, size_t n, uint32_t bytes, bool landed) {
  ActiveStep& a = lane.active;
  const char* piece = src;
  if (a.sendFrom == step::SendFrom::Output) {
    const bool inPlaceCopy = step::combineCase(a.desc) == Combine::Transform && src == dst &&
                             !step::scalesInput(a.desc, a.spec->kind) &&
                             !step::dividesResult(a.desc, a.spec->kind);  // in place: the piece is there already
    if (!inPlaceCopy && !landed) combine(a, dst, src, n);
    piece = dst;
  }
  SendConnector* out = a.send[0];
  const UserMemorySlot where{reinterpret_cast<uintptr_t>(piece), bytes};
  std::memcpy(out->slot(), &where, sizeof(where));
  out->post(kUserMemorySlotMarker, a.stamp->mine);
  for (int i = 0; i < a.desc.nRecv; ++i) a.recv[i]->release();
  if (std::find(lane.userMemorySends.begin(), lane.userMemorySends.end(), out) == lane.userMemorySends.end())
    lane.userMemorySends.push_back(out);
}

// A lane whose steps are done waits until its user-memory sends have left;
// true when that wait ended now.
bool userMemorySent(Lane& lane) {
  auto& sends = lane.userMemorySends;
  sends.erase(std::remove_if(sends.begin(), sends.end(), [](SendConnector* s) { return s->sent(); }), sends.end());
  return sends.empty();
}

void copyOut(const ActiveStep& a, char* dst, const void* from, size_t bytes) {
  if (a.streamDst)
    host::streamCopy(dst, from, bytes);
  else
    std::memcpy(dst, from, bytes);
}

}  // namespace

bool progressLane(const Plan& plan, Lane& lane, ncclResult_t* err) {
  // Fast path of a poll: the lane is inside a loaded step.
  if (!(lane.loaded && lane.done < lane.active.desc.count)) {
    // A step that sent from user memory ends when those sends have: the
    // next step may write that memory (recursive doubling reduces into the
    // dst it has just sent from).
    if (!lane.userMemorySends.empty() && !userMemorySent(lane)) return false;
    if (!settle(plan, lane)) return false;
  }
  ActiveStep& a = lane.active;
  if (sched::isWireKind(lane.segments[lane.seg].kind)) return progressWireLane(plan, lane, err);
  if (a.zeroCopy) return progressDirectSend(lane);
  const uint64_t left = a.desc.count - lane.done;
  const size_t n = a.pieceElems < left ? a.pieceElems : left;  // step::nextPiece, with the piece size cached
  const auto bytes = static_cast<uint32_t>(n * a.elemBytes);
  switch (connectorsReady(plan, lane, bytes, err)) {
    case Ready::No:
    case Ready::Failed:
      return false;
    case Ready::Descriptor:
      return receiveDirect(plan, lane, err);
    case Ready::Yes:
      break;
  }
  const size_t off = lane.done * a.elemBytes;
  const char* src = a.src ? a.src + off : nullptr;
  char* dst = a.dst ? a.dst + off : nullptr;
  // Landed (user_memory.h): the link read the piece straight into the output.
  const bool landed = a.desc.nRecv == 1 && a.recv[0]->landed();
  if (landed && (!a.landsInOutput || a.recv[0]->landedAt() != dst)) {
    *err = fail(ncclInternalError, "rank %d: lane %d: a piece landed at %p, not at the output %p",
                plan.comm ? plan.comm->id.rank : -1, laneIndex(plan, lane),
                static_cast<const void*>(a.recv[0]->landedAt()), static_cast<void*>(dst));
    return false;
  }
  if (a.sendFrom != step::SendFrom::Slot) {
    postFromUserMemory(lane, src, dst, n, bytes, landed);
    lane.done += n;
    return true;
  }
  if (landed) {
    a.recv[0]->release();
    lane.done += n;
    return true;
  }
  // Compute into the first send slot when there is one (it stays in cache for
  // the peer), else straight into the output.
  char* target = a.desc.nSend ? a.send[0]->slot() : dst;
  if (a.streamDst && target == dst && step::combineCase(a.desc) == Combine::Forward && !a.desc.post) {
    host::streamCopy(dst, a.recv[0]->slot(), bytes);  // a pure receive into a large output
  } else {
    combine(a, target, src, n);
    if (dst != nullptr && dst != target) copyOut(a, dst, target, bytes);
  }
  for (int i = 1; i < a.desc.nSend; ++i) std::memcpy(a.send[i]->slot(), target, bytes);
  for (int i = 0; i < a.desc.nSend; ++i) a.send[i]->post(bytes, a.stamp->mine);
  for (int i = 0; i < a.desc.nRecv; ++i) a.recv[i]->release();
  lane.done += n;
  return true;
}

// The step a lane waits on, or null when it has finished.
const ActiveStep* waitingStep(const Plan& plan, Lane& lane) {
  // A step that sent from user memory lasts until those sends have left
  // (progressLane): settling past it would load the next step, which may
  // land received data in the memory still being sent.
  if (!lane.userMemorySends.empty() && !userMemorySent(lane)) return lane.loaded ? &lane.active : nullptr;
  return settle(plan, lane) ? &lane.active : nullptr;
}

}  // namespace chorus
