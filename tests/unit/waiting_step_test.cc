// waitingStep (src/host/executor.h), which the idle checks and the sleep on
// network links call between passes: it must not move a lane past a step
// whose sends from user memory are still leaving, as progressLane does not.
// Settling past it loads the next step, which may land received data in the
// memory still being sent (recursive doubling reduces into the dst it has
// just sent from): a 4-host in-place all-reduce from user memory gave wrong
// results when the sleep called it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "host/executor.h"
#include "transport/fifo.h"

namespace chorus {
namespace {

TEST(WaitingStep, AStepWhoseUserMemorySendsAreLeavingIsStillTheOneWaitedIn) {
  const size_t bytes = fifoTotalBytes(4096, 2);
  std::unique_ptr<void, decltype(&std::free)> mem(std::aligned_alloc(4096, bytes), &std::free);
  ASSERT_NE(mem, nullptr);
  fifoInit(mem.get(), 4096, 2, getpid());
  FifoEnd end;
  end.ctl = static_cast<FifoControl*>(mem.get());
  end.slots = static_cast<char*>(mem.get()) + fifoControlBytes();
  end.slotBytes = 4096;
  end.nslots = 2;
  SendConnector send(end);
  send.post(kUserMemorySlotMarker);  // a descriptor of user memory the link has not sent yet

  Plan plan;
  plan.lanes.resize(1);
  Lane& lane = plan.lanes[0];
  lane.segments.resize(1);  // one single-step segment: this step is the lane's last
  lane.loaded = true;
  lane.active.desc.count = 1;
  lane.done = 1;  // its pieces are all posted
  lane.userMemorySends.push_back(&send);

  EXPECT_EQ(waitingStep(plan, lane), &lane.active);
  EXPECT_EQ(lane.seg, 0u) << "the cursor moved past a step whose user memory is still being sent";
  EXPECT_TRUE(lane.loaded);
  EXPECT_FALSE(lane.finished());

  end.ctl->head.store(1, std::memory_order_release);  // the link sent it
  EXPECT_EQ(waitingStep(plan, lane), nullptr);
  EXPECT_TRUE(lane.finished());
}

}  // namespace
}  // namespace chorus
