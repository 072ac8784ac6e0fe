// Host side of a lane launch: checks a LaneLaunch against what the kernel
// can hold and relies on, and packs it into the kernel's parameter block.
// The kernel trusts every index it reads, so a bad plan is refused here.
#include <cstring>

#include "kernels/launch.h"

namespace chorus::dev {
namespace {

bool fifoIndexValid(int16_t idx, int nFifos) { return idx >= 0 && idx < nFifos; }

bool stepValid(const DevStep& s, int nFifos) {
  if (s.nRecv > 2 || s.nSend > 2) return false;
  for (int i = 0; i < s.nRecv; ++i)
    if (!fifoIndexValid(s.recv[i], nFifos)) return false;
  for (int i = 0; i < s.nSend; ++i)
    if (!fifoIndexValid(s.send[i], nFifos)) return false;
  // Without a local output the result goes to the first send slot.
  if (s.dst == nullptr && s.nSend == 0 && s.count > 0) return false;
  // A zero-copy step is a plain send: one connector, a source, nothing else.
  if (s.direct != 0 &&
      (s.nSend != 1 || s.nRecv != 0 || s.src == nullptr || s.dst != nullptr || s.preSrc != 0 || s.post != 0))
    return false;
  return true;
}

bool directOnlyInSimple(const DevLane& lane, const DevStep* steps) {
  if (lane.protocol == Protocol::Simple) return true;
  for (uint32_t k = 0; k < lane.nSteps; ++k)
    if (steps[lane.firstStep + k].direct != 0) return false;
  return true;
}

bool laneValid(const DevLane& lane, int nSteps, size_t elemBytes) {
  if (lane.firstStep > static_cast<uint32_t>(nSteps) || lane.nSteps > static_cast<uint32_t>(nSteps) - lane.firstStep)
    return false;
  if (lane.protocol == Protocol::LL && lane.pieceBytes > kLLMaxPieceBytes) return false;
  return lane.pieceBytes >= elemBytes || lane.nSteps == 0;
}

}  // namespace

cudaError_t packLaneParams(const LaneLaunch& args, size_t elemBytes, LaneParams* params) {
  if (args.threads <= 0 || args.threads > 512 || args.threads % 32 != 0) return cudaErrorInvalidValue;
  if (args.nLanes < 0 || args.nLanes > kLaunchMaxLanes || args.nFifos < 0 || args.nFifos > kLaunchMaxFifos ||
      args.nSteps < 0 || args.nSteps > kLaunchMaxSteps)
    return cudaErrorInvalidValue;
  if ((args.nLanes > 0 && args.lanes == nullptr) || (args.nSteps > 0 && args.steps == nullptr) ||
      (args.nFifos > 0 && args.fifos == nullptr))
    return cudaErrorInvalidValue;
  for (int i = 0; i < args.nSteps; ++i)
    if (!stepValid(args.steps[i], args.nFifos)) return cudaErrorInvalidValue;
  for (int i = 0; i < args.nLanes; ++i)
    if (!laneValid(args.lanes[i], args.nSteps, elemBytes) || !directOnlyInSimple(args.lanes[i], args.steps))
      return cudaErrorInvalidValue;
  for (int i = 0; i < args.nFifos; ++i) {
    const DevFifo& f = args.fifos[i];
    if (f.tail == nullptr || f.head == nullptr || f.sizes == nullptr || f.slots == nullptr || f.position == nullptr ||
        f.nslots == 0 || f.slotBytes == 0)
      return cudaErrorInvalidValue;
  }
  params->L = args;
  params->L.lanes = nullptr;
  params->L.steps = nullptr;
  params->L.fifos = nullptr;
  if (args.nLanes > 0) std::memcpy(params->lanes, args.lanes, sizeof(DevLane) * static_cast<size_t>(args.nLanes));
  if (args.nSteps > 0) std::memcpy(params->steps, args.steps, sizeof(DevStep) * static_cast<size_t>(args.nSteps));
  if (args.nFifos > 0) std::memcpy(params->fifos, args.fifos, sizeof(DevFifo) * static_cast<size_t>(args.nFifos));
  return cudaSuccess;
}

}  // namespace chorus::dev
