#include "host/link_sleep.h"

#include <time.h>

#include "host/executor.h"
#include "sched/segment.h"
#include "transport/fifo.h"

namespace chorus {
namespace {

bool addEnd(const FifoEnd& end, std::vector<pollfd>* fds, int64_t sleepNs) {
  return end.mover != nullptr && end.mover->pollFds != nullptr && end.mover->pollFds(end.mover, fds, sleepNs);
}

// The descriptors of every connector of the step `lane` waits in. A wire
// segment waits on every connector of its rank table, not only the ones its
// step names (sched::wireDesc names the first peer's): never slept on.
bool addLaneWaits(const Plan& plan, Lane& lane, std::vector<pollfd>* fds, int64_t sleepNs) {
  const ActiveStep* a = waitingStep(plan, lane);
  if (a == nullptr) return true;
  if (sched::isWireKind(lane.segments[lane.seg].kind)) return false;
  for (int i = 0; i < a->desc.nRecv; ++i)
    if (!addEnd(a->recv[i]->end(), fds, sleepNs)) return false;
  for (int i = 0; i < a->desc.nSend; ++i)
    if (!addEnd(a->send[i]->end(), fds, sleepNs)) return false;
  return true;
}

}  // namespace

bool LinkSleeper::sleep(std::span<Plan* const> plans, int64_t timeoutUs) {
  fds_.clear();
  for (Plan* p : plans) {
    bool waitsInALane = false;
    for (Lane& lane : p->lanes) {
      if (lane.finished()) continue;
      waitsInALane = true;
      if (!addLaneWaits(*p, lane, &fds_, timeoutUs * 1000)) return false;
    }
    if (!waitsInALane) return false;  // waits for its receivers or roots, not on a lane's connectors
  }
  if (fds_.empty()) return false;
  const timespec ts{static_cast<time_t>(timeoutUs / 1000000), static_cast<long>(timeoutUs % 1000000) * 1000};
  (void)ppoll(fds_.data(), fds_.size(), &ts, nullptr);
  return true;
}

}  // namespace chorus
