// The work a GPU kernel launch runs: the device form of a host plan
// (src/host/host_plan.h). A launch has one thread block per lane; a lane is a
// list of steps run in order, and a step moves `count` elements in pieces of
// the lane's piece size, exactly like progressLane() in src/host/step_exec.cc,
// so the host and the GPU combine the same operands in the same order and
// produce bit-identical results.
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

#include "kernels/common/reduce_kind.h"
#include "nccl.h"

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
  uint32_t* sizes = nullptr;  // bytes of each published piece (Simple)
  char* slots = nullptr;
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  uint64_t* position = nullptr;
  int32_t peer = -1;  // communicator rank at the other end, for error reports
};

inline constexpr int kNoFifo = -1;

struct DevStep {
  int16_t recv[2] = {kNoFifo, kNoFifo};  // indices into LaneLaunch::fifos
  int16_t send[2] = {kNoFifo, kNoFifo};
  uint8_t nRecv = 0;
  uint8_t nSend = 0;
  uint8_t preSrc = 0;  // apply PreMulSum's scalar to src
  uint8_t post = 0;    // apply SumPostDiv's division to the result
  uint8_t direct = 0;  // a plain send posted zero-copy (kernels/common/direct_slot.h); Simple lanes only
  const void* src = nullptr;
  void* dst = nullptr;
  uint64_t count = 0;  // elements
};

struct DevLane {
  uint32_t firstStep = 0;
  uint32_t nSteps = 0;
  uint32_t pieceBytes = 0;               // payload per piece; for LL at most kLLMaxPieceBytes and half the slot
  Protocol protocol = Protocol::Simple;  // of every connector the lane uses
};

// LL pieces are staged in shared memory, which bounds their size.
inline constexpr uint32_t kLLMaxPieceBytes = 4096;

// Why a launch stopped early; written once to LaneLaunch::status.
enum class LaneStatus : int32_t { Ok = 0, Aborted = 1, TimedOut = 2, SizeMismatch = 3 };

// Written once by the first failing thread: it claims the record, fills the
// fields, fences, and publishes `status` last, so a host that sees a nonzero
// status also sees the fields.
struct LaneStatusRecord {
  int32_t status = 0;  // a LaneStatus
  int32_t lane = -1;
  int32_t peer = -1;
  uint32_t detail = 0;  // SizeMismatch: bytes received
  int32_t claim = 0;    // nonzero once a thread owns the record
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
  const DevStep* steps = nullptr;  // host memory, nSteps entries
  int nSteps = 0;
  const DevFifo* fifos = nullptr;  // host memory, nFifos entries
  int nFifos = 0;
  const volatile int32_t* abortFlag = nullptr;  // device-visible (mapped host memory); nonzero stops the launch
  LaneStatusRecord* status = nullptr;           // device-visible; first failure wins
  uint64_t timeoutNs = 0;                       // longest wait with no piece moving; 0: no limit (still stops on abort)
  int threads = 256;                            // per block, a multiple of 32, at most 512
};

// Capacity of one launch. A plan that needs more is split by the executor at
// task boundaries (never inside a task, whose lanes wait for each other).
inline constexpr int kLaunchMaxLanes = 64;
inline constexpr int kLaunchMaxFifos = 128;
inline constexpr int kLaunchMaxSteps = 512;

// The kernel's parameter block (passed by value, __grid_constant__). The
// header's array pointers are unused on the device.
struct LaneParams {
  LaneLaunch L;
  DevLane lanes[kLaunchMaxLanes];
  DevFifo fifos[kLaunchMaxFifos];
  DevStep steps[kLaunchMaxSteps];
};
// CUDA 12.1+ on sm_70+ accepts kernel parameters up to 32764 bytes.
static_assert(sizeof(LaneParams) <= 32764, "the lane kernel's parameters must fit the launch limit");

}  // namespace chorus::dev
