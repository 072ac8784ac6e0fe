// A host plan: the work of one rank for one group of operations, as
// independent lanes of steps. A step moves one contiguous run of elements:
// it takes pieces from up to two receive connectors and/or a local input,
// combines them, and writes the result to a local output and/or up to two send
// connectors. Steps within a lane run in order; lanes progress independently,
// which is what lets a send to A and a receive from B (or a tree's reduce and
// broadcast halves) overlap without deadlocking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "enqueue/task.h"
#include "transport/fifo.h"
#include "tune/cost_model.h"

struct ncclComm;

namespace chorus {

struct HostStep {
  RecvConnector* recv[2] = {nullptr, nullptr};
  SendConnector* send[2] = {nullptr, nullptr};
  uint8_t nRecv = 0;
  uint8_t nSend = 0;
  bool preSrc = false;     // apply PreMulSum's scalar to src
  bool post = false;       // apply SumPostDiv's division to the result
  bool streamDst = false;  // dst is much larger than the caches: write it with non-temporal stores
  // A pure send of a registered buffer: zero-copy
  // (kernels/common/direct_slot.h) when its connector's receiver can read our buffers
  // (FifoEnd::peerReadsOurBuffers), else through the FIFO as usual.
  bool direct = false;
  const char* src = nullptr;
  char* dst = nullptr;
  size_t count = 0;  // elements
  const ReduceSpec* spec = nullptr;
};

struct Lane {
  std::vector<HostStep> steps;
  size_t pieceBytes = 0;        // slot size of this lane's connectors
  Proto proto = Proto::Simple;  // of every connector the lane uses
  size_t cur = 0;               // current step
  size_t done = 0;              // elements of the current step already processed
  bool awaitingReader = false;  // a direct send step is posted; it ends when the receiver freed the slot
  uint64_t readerCopied = 0;    // the receiver's progress last seen while awaiting it
  bool finished() const { return cur >= steps.size(); }
};

struct HostPlan {
  ncclComm* comm = nullptr;
  std::vector<Task> tasks;  // owns the ReduceSpecs the steps point at
  std::vector<Lane> lanes;
  double estimatedUs = 0;
  // GPU mode: the plan translated into kernel launches (src/gpu/cuda/), made
  // on first use and reused with the plan.
  std::shared_ptr<const void> deviceForm;
  // RegistrationTable::epoch() when the plan was built: which sends are
  // direct depends on what was registered, so a plan of another epoch is
  // rebuilt rather than reused.
  uint64_t registrationEpoch = 0;
};

}  // namespace chorus
