// Sleeping on network links instead of yielding (src/host/link_sleep.h): a
// wait whose lanes all wait on links that can name their descriptors sleeps
// in poll() and wakes when one becomes ready; anything else (an end without
// descriptors, a link that moved while asked, a wire segment, a plan whose
// lanes are done) returns at once without sleeping, so the executor yields
// as before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "host/link_sleep.h"
#include "transport/fifo.h"

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;

// A link whose descriptor is a pipe's read end.
struct PipeMover : InlineMover {
  int fd = -1;
  int asked = 0;
  bool movedWhenAsked = false;
};

bool pipePollFds(InlineMover* m, std::vector<pollfd>* fds, int64_t /*sleepNs*/) {
  auto* p = static_cast<PipeMover*>(m);
  ++p->asked;
  if (p->movedWhenAsked) return false;
  fds->push_back(pollfd{p->fd, POLLIN, 0});
  return true;
}

// One plan with one lane whose current step receives on `end`.
struct OneWaitingLane {
  RecvConnector conn;
  Plan plan;
  Plan* plans[1] = {&plan};
  explicit OneWaitingLane(FifoEnd end) : conn(std::move(end)) {
    plan.lanes.resize(1);
    Lane& lane = plan.lanes[0];
    lane.segments.resize(1);
    lane.loaded = true;
    lane.active.desc.count = 1;
    lane.active.desc.nRecv = 1;
    lane.active.recv[0] = &conn;
  }
};

class LinkSleep : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pipe(fds_), 0);
    mover_.pollFds = &pipePollFds;
    mover_.fd = fds_[0];
  }
  void TearDown() override {
    close(fds_[0]);
    close(fds_[1]);
  }
  FifoEnd endWithMover() {
    FifoEnd e;
    e.mover = &mover_;
    return e;
  }
  static double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
  int fds_[2] = {-1, -1};
  PipeMover mover_;
  LinkSleeper sleeper_;
};

TEST_F(LinkSleep, AMessageOnTheLinkEndsTheSleep) {
  OneWaitingLane w(endWithMover());
  std::thread writer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const char c = 1;
    EXPECT_EQ(write(fds_[1], &c, 1), 1);
  });
  const auto t0 = Clock::now();
  EXPECT_TRUE(sleeper_.sleep(w.plans, 10'000'000));
  const double s = secondsSince(t0);
  writer.join();
  EXPECT_GE(s, 0.05) << "it returned before the message came";
  EXPECT_LT(s, 5.0) << "the message did not wake it";
  EXPECT_EQ(mover_.asked, 1);
}

TEST_F(LinkSleep, NothingComingSleepsForTheBound) {
  OneWaitingLane w(endWithMover());
  const auto t0 = Clock::now();
  EXPECT_TRUE(sleeper_.sleep(w.plans, 30'000));
  const double s = secondsSince(t0);
  EXPECT_GE(s, 0.025);
  EXPECT_LT(s, 2.0);
}

TEST_F(LinkSleep, WhatCannotNameItsDescriptorsIsNotSleptOn) {
  {
    OneWaitingLane noMover(FifoEnd{});  // shared memory, or a link moved only by its proxy
    EXPECT_FALSE(sleeper_.sleep(noMover.plans, 10'000'000));
  }
  {
    mover_.movedWhenAsked = true;  // what arrived meanwhile is to be taken first
    OneWaitingLane moved(endWithMover());
    EXPECT_FALSE(sleeper_.sleep(moved.plans, 10'000'000));
    EXPECT_EQ(mover_.asked, 1);
  }
}

TEST_F(LinkSleep, AWireSegmentIsNotSleptOn) {
  // It waits on every connector of its rank table, not only the one its step
  // names (shared memory among them): sleeping on that one could miss the rest.
  OneWaitingLane w(endWithMover());
  w.plan.lanes[0].segments[0].kind = sched::SegmentKind::WireOwner;
  EXPECT_FALSE(sleeper_.sleep(w.plans, 10'000'000));
}

TEST_F(LinkSleep, APlanWhoseLanesAreDoneIsNotSleptOn) {
  // Its lanes finished; it waits for its receivers' acks or its roots, which
  // no lane's connector names.
  OneWaitingLane w(endWithMover());
  w.plan.lanes[0].segments.clear();
  const auto t0 = Clock::now();
  EXPECT_FALSE(sleeper_.sleep(w.plans, 10'000'000));
  EXPECT_LT(secondsSince(t0), 1.0);
  EXPECT_EQ(mover_.asked, 0);
}

}  // namespace
}  // namespace chorus
