// The work a GPU kernel launch runs: the device form of a plan
// (src/plan/plan.h). A launch has one thread block per lane; a lane is a few
// segments (src/sched/segment.h) whose steps the kernel generates with the
// same functions as the host executor, and runs piece by piece by the rules
// of kernels/common/step_rules.h, so the host and the GPU combine the same
// operands in the same order and produce bit-identical results. The
// parameter block holds segments, never one entry per chunk, so its size does
// not depend on the message size: a 16 GiB all-reduce is one launch.
//
// Connectors are the FIFOs of src/transport/fifo.h, placed in memory the GPU
// can reach (device memory for P2P, pinned host memory for SHM staging). Two
// protocols move a piece through a slot:
//   Simple  the slot holds the piece; the sender publishes it by advancing
//           `tail` (one flag per slot). For bandwidth.
//   LL      the slot holds 8-byte lines {4 data bytes, 4 flag bytes}; a line
//           is valid when its flag equals the piece's sequence number, so the
//           receiver needs no separate flag read and no fence on the sender.
//           Half of each slot is flags: for latency-bound small messages.
// In both, the receiver frees a slot by advancing `head`, which the sender
// reads before reusing it. A Simple slot may instead carry a zero-copy
// descriptor of a whole send step (kernels/common/direct_slot.h).
//
// Plain C++ (no CUDA headers): the host side fills these, the kernels read them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/lane_wait_word.h"
#include "kernels/common/reduce_kind.h"
#include "kernels/common/step_rules.h"
#include "nccl.h"
#include "sched/segment.h"

namespace chorus::dev {

enum class Protocol : uint8_t { Simple = 0, LL = 1 };

// Bytes of payload an LL slot of `slotBytes` carries (half are flags).
constexpr uint32_t llPayloadBytes(uint32_t slotBytes) { return slotBytes / 2; }

// One connector end as a kernel sees it. `position` is this end's counter
// (the sender's tail or the receiver's head), kept in device memory so it
// survives from one launch to the next; only the lane that owns the end
// touches it.
struct DevFifo {
  uint64_t* tail = nullptr;   // written by the sender
  uint64_t* head = nullptr;   // written by the receiver
  uint32_t* sizes = nullptr;  // bytes of each published piece (Simple and LL)
  char* slots = nullptr;
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  uint64_t* position = nullptr;
  // The FIFO's fingerprints and verdict (src/core/op_fingerprint.h); null
  // when the FIFO carries none (a kernel test's bare FIFO).
  FifoPrints* prints = nullptr;
  int32_t peer = -1;  // communicator rank at the other end, for error reports
  // A send end whose receiver's call the launch does not prove equal
  // (classifySends, src/plan/plan_verdict.cc): the lane with this index waits
  // at its end until the receiver took every slot (and so checked its
  // fingerprint). -1: not waited for.
  int8_t drainBy = -1;
};

inline constexpr int kNoFifo = -1;

// A step as the kernel runs it: the sched::StepDesc generated from a
// segment (its connector ids are indices of LaneParams::fifos) with its
// offsets turned into pointers. Made on the fly (resolveStep in
// lane_kernel.cuh), never stored.
struct DevStep {
  sched::StepDesc desc;
  uint16_t task = 0;          // the segment's task: index of LaneParams::prints
  const void* src = nullptr;  // at the step's first element, or null
  void* dst = nullptr;
};

struct DevLane {
  uint32_t firstSegment = 0;
  uint32_t nSegments = 0;
  uint32_t pieceBytes = 0;               // payload per piece; for LL at most kLLMaxPieceBytes and half the slot
  Protocol protocol = Protocol::Simple;  // of every connector the lane uses
};

// LL pieces are staged in shared memory, which bounds their size.
inline constexpr uint32_t kLLMaxPieceBytes = 4096;

// Payload of one LL piece through a slot of `slotBytes` on the GPU (its
// lines, step::llLineBytes, fill at most the slot). Plans size their steps
// in these (PlanBuilder::pieceBytes); the translation and the kernel's
// parameter checks refuse pieces whose lines do not fit.
constexpr uint32_t llPieceBytes(uint32_t slotBytes) {
  return llPayloadBytes(slotBytes) < kLLMaxPieceBytes ? llPayloadBytes(slotBytes) : kLLMaxPieceBytes;
}

using LaneStatus = step::LaneStatus;
using LaneStatusRecord = step::LaneFailure;

// What a communicator's lanes tell the host about their waits, for the stall
// report (docs/reliability.md, "Stall reports"); mapped host memory, one
// word per lane of a launch (step::packLaneWait's layout, so the host never
// reads half of an update). Written by thread 0 of a waiting lane from the
// Waiter's slow path, only when the value changes: when the lane last made
// progress (%globaltimer) and on whom it waits; a lane that ends writes its
// end time and no peer. The host compares what it reads over time: nothing
// changed while the communicator's kernels run = no progress.
struct LaneWaits {
  uint64_t word[64];
};

// One launch as the host describes it. The three arrays are in host memory:
// launchLanes() copies them into the kernel's parameters (LaneParams), so a
// launch needs no device allocation or upload and is captured into a CUDA
// graph with its plan (a replay runs exactly what was captured).
struct LaneLaunch {
  ncclDataType_t type = ncclFloat32;
  ReduceKind kind = ReduceKind::Sum;
  const void* scalar = nullptr;    // PreMulSum: device pointer; null: use scalarBits
  uint64_t scalarBits = 0;         // PreMulSum with a host scalar: its bytes (one element of `type`)
  int divisor = 1;                 // SumPostDiv
  const DevLane* lanes = nullptr;  // host memory, nLanes entries
  int nLanes = 0;
  // Host memory. Segment::conn holds indices of `fifos`; Segment::ringTable of `rankTable`.
  const sched::Segment* segments = nullptr;
  int nSegments = 0;
  const DevFifo* fifos = nullptr;  // host memory, nFifos entries
  int nFifos = 0;
  const int32_t* rankTable = nullptr;  // host memory, nRankTable entries
  int nRankTable = 0;
  const volatile int32_t* abortFlag = nullptr;  // device-visible (mapped host memory); nonzero stops the launch
  LaneStatusRecord* status = nullptr;           // device-visible; first failure wins
  LaneWaits* waits = nullptr;                   // device-visible, or null
  uint64_t timeoutNs = 0;                       // longest wait with no piece moving; 0: no limit (still stops on abort)
  int threads = 256;                            // per block, a multiple of 32, at most 512
  // Fingerprints of the launch's tasks (host memory, nTasks entries;
  // Segment::task indexes it): what this rank's slots carry. None (0): the
  // launch's slots carry no fingerprint and none is checked.
  const OpPrint* prints = nullptr;
  int nTasks = 0;
  int32_t rank = -1;  // this rank, for mismatch records
  // A wire launch (docs/wire.md): the lanes of one direct reduction, run by
  // the wire kernel (kernels/colls/wire_kernel.cuh), with the task's wire
  // format (wire::Format) and its error-feedback residual (device memory,
  // indexed like the task's input; null: none).
  bool wire = false;
  uint8_t wireFormat = 0;
  float* residual = nullptr;
};

// Capacity of one launch. A plan that needs more is split by the executor at
// task boundaries (never inside a task, whose lanes wait for each other).
inline constexpr int kLaunchMaxLanes = 64;
inline constexpr int kLaunchMaxFifos = 128;
inline constexpr int kLaunchMaxSegments = 192;
inline constexpr int kLaunchMaxRankTable = 1024;
inline constexpr int kLaunchMaxTasks = 88;
// Ranks a wire segment's table can name (an owner's holds 3 entries per rank).
inline constexpr int kWireMaxRanks = kLaunchMaxRankTable / 3;
static_assert(kLaunchMaxLanes <= 64, "LaneWaits has 64 entries; DevFifo::drainBy is an int8_t");

// The kernel's parameter block (passed by value, __grid_constant__). The
// header's array pointers are unused on the device.
struct LaneParams {
  LaneLaunch L;
  DevLane lanes[kLaunchMaxLanes];
  DevFifo fifos[kLaunchMaxFifos];
  sched::Segment segments[kLaunchMaxSegments];
  int32_t rankTable[kLaunchMaxRankTable];
  OpPrint prints[kLaunchMaxTasks];
};
// CUDA 12.1+ on sm_70+ accepts kernel parameters up to 32764 bytes.
static_assert(sizeof(LaneParams) <= 32764, "the lane kernel's parameters must fit the launch limit");

}  // namespace chorus::dev
