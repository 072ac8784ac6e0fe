// GPU memory releases held back while kernels run (src/gpu/deferred_release.h):
// a release runs at once on an idle device, waits while the device is busy,
// and runs with the next release or check once the device is idle; devices
// are independent; a thread kernels wait on never runs one itself.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "gpu/deferred_release.h"

namespace chorus::gpu {
namespace {

struct Devices {
  std::set<int> busy;
  std::vector<int> released;  // tags, in the order they ran
  DeferredReleases::BusyFn busyFn() {
    return [this](int d) { return busy.count(d) != 0; };
  }
  DeferredReleases::Release tag(int t) {
    return [this, t] { released.push_back(t); };
  }
};

TEST(DeferredReleases, AnIdleDeviceReleasesAtOnce) {
  Devices d;
  DeferredReleases q;
  q.releaseOrHold(0, d.tag(1), d.busyFn());
  EXPECT_EQ(d.released, std::vector<int>{1});
  EXPECT_EQ(q.held(), 0u);
}

TEST(DeferredReleases, ABusyDeviceHoldsUntilItIsIdle) {
  Devices d;
  DeferredReleases q;
  d.busy = {0};
  q.releaseOrHold(0, d.tag(1), d.busyFn());
  q.releaseOrHold(0, d.tag(2), d.busyFn());
  EXPECT_TRUE(d.released.empty()) << "nothing may be freed while a kernel on the device runs";
  EXPECT_EQ(q.runIdle(d.busyFn()), 0u);
  EXPECT_EQ(q.held(), 2u);
  d.busy.clear();
  EXPECT_EQ(q.runIdle(d.busyFn()), 2u);
  EXPECT_EQ(d.released, (std::vector<int>{1, 2}));
  EXPECT_EQ(q.held(), 0u);
}

TEST(DeferredReleases, TheNextReleaseOnAnIdleDeviceTakesTheHeldOnesFirst) {
  Devices d;
  DeferredReleases q;
  d.busy = {0, 1};
  q.releaseOrHold(0, d.tag(1), d.busyFn());
  q.releaseOrHold(1, d.tag(2), d.busyFn());
  d.busy = {1};
  q.releaseOrHold(0, d.tag(3), d.busyFn());
  EXPECT_EQ(d.released, (std::vector<int>{1, 3})) << "device 1 is still busy: its release stays held";
  EXPECT_EQ(q.held(), 1u);
  d.busy.clear();
  EXPECT_EQ(q.runIdle(d.busyFn()), 1u);
  EXPECT_EQ(d.released, (std::vector<int>{1, 3, 2}));
}

TEST(DeferredReleases, AThreadKernelsWaitOnHoldsEvenOnAnIdleDevice) {
  // The network proxy: another communicator could launch a kernel that waits
  // for it between the idle check and the free; the watchdog runs it instead.
  Devices d;
  DeferredReleases q;
  q.hold(0, d.tag(1));
  EXPECT_TRUE(d.released.empty());
  EXPECT_EQ(q.held(), 1u);
  EXPECT_EQ(q.runIdle(d.busyFn()), 1u);
  EXPECT_EQ(d.released, std::vector<int>{1});
}

}  // namespace
}  // namespace chorus::gpu
