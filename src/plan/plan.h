// A plan: the work of one rank for one group of operations, run by either
// executor (src/host/ on CPU threads, src/gpu/ as lane-kernel launches).
//
// A plan is independent *lanes*; a lane is a short list of *segments*
// (src/sched/segment.h), each generating its steps on demand. A step moves
// one contiguous run of elements: it takes pieces from up to two receive
// connectors and/or a local input, combines them, and writes the result to a
// local output and/or up to two send connectors. Steps within a lane run in
// order; lanes progress independently, which is what lets a send to A and a
// receive from B (or a tree's reduce and broadcast halves) overlap without
// deadlocking. A plan's size depends on its lanes and tasks, never on the
// message size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "enqueue/task.h"
#include "kernels/common/user_memory.h"
#include "sched/segment.h"
#include "transport/fifo.h"
#include "tune/cost_model.h"

struct ncclComm;

namespace chorus {

// One entry of the plan's connector table; a segment's conn[] ids index it.
// Exactly one of the two is set.
struct ConnRef {
  RecvConnector* recv = nullptr;
  SendConnector* send = nullptr;
  const FifoEnd& end() const { return recv ? recv->end() : send->end(); }
};

// The fingerprints of one task of a plan for the current launch (the
// sequence number changes from call to call; the cached plan does not).
struct OpStamp {
  OpPrint mine;    // stamped on every slot this rank posts for the task
  OpPrint expect;  // what the peers' slots must carry (expectedFromPeer(mine))
};

// The step a lane is on, resolved for the host executor: the generated
// StepDesc with its connectors, buffers and reduction.
struct ActiveStep {
  sched::StepDesc desc;
  step::CombinePlan combine;       // step_rules.h's combinePlan, decided when the step is loaded
  const OpStamp* stamp = nullptr;  // of the step's task
  RecvConnector* recv[2] = {nullptr, nullptr};
  SendConnector* send[2] = {nullptr, nullptr};
  const char* src = nullptr;  // at the step's first element, or null
  char* dst = nullptr;
  const ReduceSpec* spec = nullptr;
  uint32_t elemBytes = 1;
  bool streamDst = false;                          // dst is much larger than the caches: non-temporal stores
  bool zeroCopy = false;                           // step_rules.h's sendsZeroCopy, decided when the step is loaded
  step::SendFrom sendFrom = step::SendFrom::Slot;  // user_memory.h's sendSource, decided when loaded
  bool landsInOutput = false;                      // user_memory.h's landsInOutput, where recv[0] offers landings
  uint64_t pieceElems = 0;                         // step_rules.h's pieceElems for the lane's piece size
};

struct Lane {
  std::vector<sched::Segment> segments;
  uint32_t pieceBytes = 0;      // slot size of this lane's connectors
  Proto proto = Proto::Simple;  // of every connector the lane uses
  // Where the lane is: segment, step within it, elements of that step done.
  size_t seg = 0;
  uint64_t step = 0;
  uint64_t done = 0;
  bool loaded = false;  // `active` holds step (seg, step)
  ActiveStep active;
  bool awaitingReader = false;  // a zero-copy send is posted; it ends when the receiver freed the slot
  uint64_t readerCopied = 0;    // the receiver's progress last seen while awaiting it
  // The connectors this lane's current step handed user memory (SendFrom
  // other than Slot): the step ends only once they have sent all of it
  // (SendConnector::sent), so neither a later step (recursive doubling
  // reduces into the dst it has just sent from) nor the caller after the
  // plan changes memory still in flight.
  std::vector<SendConnector*> userMemorySends;
  bool stepsDone() const { return seg >= segments.size(); }
  bool finished() const { return stepsDone() && userMemorySends.empty(); }
  void rewind() {
    seg = 0;
    step = 0;
    done = 0;
    loaded = false;
    awaitingReader = false;
    userMemorySends.clear();
  }
};

struct Plan {
  ncclComm* comm = nullptr;
  std::vector<Task> tasks;      // owns the ReduceSpecs; Segment::task indexes it
  std::vector<OpStamp> stamps;  // one per task, set for each launch (stampPlan)
  // Made once by the first stampPlan (a plan's tasks never change): `stamps`
  // but for their sequence numbers, which each launch sets, and how many of
  // the tasks are collectives (not Send/Recv).
  bool stampsMade = false;
  int collectives = 0;
  // The highest sequence number of the plan's collectives in this launch
  // (0: none), the mark its completion marks carry (plan_verdict.cc).
  uint64_t collectiveSeq = 0;
  // The send connectors whose receiver's call is not proven to match by the
  // plan's own receives (plan_verdict.cc); sendsTaken waits for these only.
  // Set once the plan's connectors are connected (stampPlan or connectPlan);
  // until then every send connector counts.
  std::vector<SendConnector*> unprovenSends;
  // Of those, the ones whose receiver must also have completed the
  // operation (FifoControl::doneSeq) before this plan reports success: in a
  // broadcast or reduce a rank hears nothing back from the ranks it sends to,
  // so without this a root could succeed while a rank further down fails.
  // Only awaited on connectors whose control block both ends share (no proxy).
  std::vector<SendConnector*> awaitDone;
  // The receive connectors whose sender must have completed the operation
  // (FifoControl::sentDoneSeq) before this plan reports success: a scatter's
  // receivers hear nothing else from their root, which waits for all of them.
  std::vector<RecvConnector*> awaitRootDone;
  bool sendsClassified = false;
  // Set with sendsClassified: some send connector passes on whether the plan
  // waits for its receiver (FifoEnd::takenCounter, flagAwaitedSends).
  bool flagsSends = false;
  // Set with sendsClassified: the plan is done when its lanes are (no send,
  // root or completion mark to wait for, nothing to mark at the end), which
  // lets the executor skip the checks above on every pass.
  bool finishesWithLanes = false;
  // Wait chains (plan/setup_notes.cc) this launch may still pass on: set by
  // stampPlan, so a call that stalls in a large group cannot flood its peers.
  static constexpr uint32_t kWaitNotesPerLaunch = 64;
  mutable uint32_t waitNotesLeft = 0;
  std::vector<Lane> lanes;
  std::vector<ConnRef> conns;
  std::vector<int32_t> rankTable;  // ring orders of RingGather/RingScatter segments (Segment::ringTable)
  double estimatedUs = 0;
  // GPU mode: the plan translated into kernel launches (src/gpu/cuda/), made
  // on first use and reused with the plan.
  std::shared_ptr<const void> deviceForm;
  // RegistrationTable::epoch() when the plan was built: which sends are
  // direct depends on what was registered, so a plan of another epoch is
  // rebuilt rather than reused.
  uint64_t registrationEpoch = 0;

  const int32_t* ringTableOf(const sched::Segment& s) const {
    return s.ringTable >= 0 ? rankTable.data() + s.ringTable : nullptr;
  }
};

// The spec a segment's elements are combined with: its task's, or a plain
// byte copy for segments that move raw bytes (sched::kSegBytes).
// Numbers the plan's tasks as the next operations of its communicator
// (OpCounters) and sets `stamps`. Once per launch, under the comm's opMutex.
void stampPlan(Plan& plan);

// Operation mismatches across connectors (src/plan/plan_verdict.cc): leaves
// `r` on every connector of the plan (first verdict per connector wins)...
void spreadMismatch(const Plan& plan, const OpMismatchRecord& r);
// ...and finds one left on any of them by a peer.
bool findMismatch(const Plan& plan, OpMismatchRecord* r);
// A slot waiting on one of the communicator's receive connectors that
// belongs to an operation this rank has numbered but fits none of the
// plan's tasks: a peer called something this rank will never receive (a
// different root, a different collective). Called while the plan is idle.
bool findStraySlot(const Plan& plan, OpMismatchRecord* r);
// Every slot the plan's send connectors posted has been taken by its
// receiver (which checked its fingerprint), so the plan may report success;
// connectors whose receiver's call the plan's own receives proved equal are
// not waited for (classifySends, once per plan, when its connectors are connected).
bool sendsTaken(const Plan& plan);
void classifySends(Plan& plan);
// Tells each send connector whether this call waits for its receiver to take
// what it sends (unprovenSends; every send while the plan is unclassified).
void flagAwaitedSends(const Plan& plan);
// Its receive connectors tell their senders that this rank completed the
// operation (FifoControl::doneSeq): a broadcast or reduce plan when it
// finished (markPlanDone, from the host executor), any other plan when it
// starts (markPlanStarted, from stampPlan; host mode). A rooted plan also
// publishes its fingerprint on its receive connectors when it starts
// (FifoControl::intent), and marks its send connectors when it finished.
void markPlanStarted(const Plan& plan);
void markPlanDone(const Plan& plan);
// The peer whose completion the plan still awaits (awaitDone, awaitRootDone), or -1.
int awaitedCompletion(const Plan& plan);
// The senders in awaitRootDone have completed (a scatter's root finished).
bool rootsDone(const Plan& plan);
// A send connector of the communicator whose receiver waits (FifoControl::
// intent) for an operation this rank numbers the same but calls differently:
// the two ranks' calls do not match, though no slot may ever flow. Called
// while the plan is idle, next to findStraySlot.
bool findStrayWait(const Plan& plan, OpMismatchRecord* r);

const ReduceSpec& segmentSpec(const Plan& plan, const sched::Segment& s);

// Bytes of the plan itself (lanes, segments, connector and rank tables), for
// chorus-topo --plan and the test that a plan does not grow with the message.
size_t planFootprintBytes(const Plan& plan);

}  // namespace chorus
