// Ring schedules.
//
// Ranks form a ring r -> r+1. Every ring collective moves data one hop per
// step, so each link carries the same load and the bus bandwidth approaches the
// slowest link's bandwidth:
//   * ReduceScatter: n-1 steps; at step s rank r forwards its partial sum of
//     chunk (r-s-1) mod n. After the last step rank r holds chunk r, fully
//     reduced. Each rank sends (n-1)/n of the data.
//   * AllGather: n-1 steps; at step t rank r forwards chunk (r-t) mod n, which
//     it received at step t-1 (its own chunk at t=0).
//   * AllReduce = ReduceScatter + AllGather: 2(n-1)/n of the data per rank,
//     the bandwidth-optimal volume.
//   * Broadcast / Reduce: a chain starting after (resp. ending at) the root;
//     data is cut into pieces so all links are busy at once.
//
// To keep the FIFOs from deadlocking, a channel's elements are processed in
// rounds of n chunks where one chunk never exceeds the slots of one FIFO: at a
// step's start every rank can push its whole chunk without waiting for the
// next rank to drain. The functions here only do index arithmetic; executors
// turn them into data movement.
#pragma once

#include "sched/chunking.h"

namespace chorus::sched {

// What a rank does with one chunk at one step of a ring collective.
enum class RingAction : uint8_t {
  Send,                // send own input (first step)
  RecvReduceSend,      // reduce incoming with own input, forward
  RecvReduceCopy,      // reduce incoming with own input, keep (last RS step of ReduceScatter / Reduce root)
  RecvReduceCopySend,  // reduce, keep the final value and forward it (AllReduce's turn from RS to AG)
  RecvCopySend,        // keep incoming and forward it
  Recv,                // keep incoming (last step)
  CopySend,            // copy own input to output and forward it (AllGather's first step)
};

// What an action touches: the connectors, the local input and output, and
// whether the local input is reduced in (PreMulSum applies) and the final
// value produced (the average's division applies).
struct RingActionShape {
  bool recvs, sends, reduces, keeps, readsInput, divides;
};

CHORUS_SCHED_FN RingActionShape ringActionShape(RingAction a) {
  RingActionShape s{};
  s.recvs = a != RingAction::Send && a != RingAction::CopySend;
  s.sends = a != RingAction::Recv && a != RingAction::RecvReduceCopy;
  s.reduces = a == RingAction::Send || a == RingAction::RecvReduceSend || a == RingAction::RecvReduceCopy ||
              a == RingAction::RecvReduceCopySend;
  s.keeps = a == RingAction::RecvReduceCopy || a == RingAction::RecvReduceCopySend || a == RingAction::RecvCopySend ||
            a == RingAction::Recv || a == RingAction::CopySend;
  s.readsInput = s.reduces || a == RingAction::CopySend;
  s.divides = a == RingAction::RecvReduceCopy || a == RingAction::RecvReduceCopySend;
  return s;
}

struct RingStep {
  RingAction action;
  int chunk;  // which of the round's n chunks
};

CHORUS_SCHED_FN int ringNext(int rank, int nranks) { return (rank + 1) % nranks; }
CHORUS_SCHED_FN int ringPrev(int rank, int nranks) { return (rank + nranks - 1) % nranks; }

// AllReduce: steps 0 .. 2n-2.
CHORUS_SCHED_FN int ringAllReduceSteps(int nranks) { return 2 * nranks - 1; }
CHORUS_SCHED_FN RingStep ringAllReduceStep(int rank, int nranks, int step) {
  if (step == 0) return {RingAction::Send, mod(rank - 1, nranks)};
  if (step < nranks - 1) return {RingAction::RecvReduceSend, mod(rank - step - 1, nranks)};
  if (step == nranks - 1) return {RingAction::RecvReduceCopySend, rank};
  const int t = step - (nranks - 1);  // all-gather step 1 .. n-1
  return {t < nranks - 1 ? RingAction::RecvCopySend : RingAction::Recv, mod(rank - t, nranks)};
}

// ReduceScatter: steps 0 .. n-1; rank r ends with chunk r.
CHORUS_SCHED_FN int ringReduceScatterSteps(int nranks) { return nranks; }
CHORUS_SCHED_FN RingStep ringReduceScatterStep(int rank, int nranks, int step) {
  const int chunk = mod(rank - step - 1, nranks);
  if (step == 0) return {RingAction::Send, chunk};
  if (step < nranks - 1) return {RingAction::RecvReduceSend, chunk};
  return {RingAction::RecvReduceCopy, chunk};
}

// AllGather: steps 0 .. n-1; chunk k is rank k's contribution.
CHORUS_SCHED_FN int ringAllGatherSteps(int nranks) { return nranks; }
CHORUS_SCHED_FN RingStep ringAllGatherStep(int rank, int nranks, int step) {
  const int chunk = mod(rank - step, nranks);
  if (step == 0) return {RingAction::CopySend, chunk};
  if (step < nranks - 1) return {RingAction::RecvCopySend, chunk};
  return {RingAction::Recv, chunk};
}

// Broadcast chain root -> root+1 -> ... -> root-1. Position 0 is the root.
CHORUS_SCHED_FN int chainPosition(int rank, int root, int nranks) { return mod(rank - root, nranks); }
CHORUS_SCHED_FN RingAction ringBroadcastAction(int rank, int root, int nranks) {
  const int pos = chainPosition(rank, root, nranks);
  if (pos == 0) return RingAction::CopySend;
  return pos == nranks - 1 ? RingAction::Recv : RingAction::RecvCopySend;
}

// Reduce chain root+1 -> root+2 -> ... -> root.
CHORUS_SCHED_FN RingAction ringReduceAction(int rank, int root, int nranks) {
  const int pos = chainPosition(rank, root, nranks);
  if (pos == 1) return RingAction::Send;
  return pos == 0 ? RingAction::RecvReduceCopy : RingAction::RecvReduceSend;
}

}  // namespace chorus::sched
