// chooseMode: the one decision "host or GPU mode" for what is about to be
// created (communicators, ncclMemAlloc). A split/shrink child keeps its
// parent's mode and device without asking the environment; otherwise the
// process default decides, and an unmet GPU request fails.
#include <gtest/gtest.h>

#include <string>

#include "core/comm.h"
#include "core/mode.h"
#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus::test {
namespace {

struct DefaultModeScope {
  explicit DefaultModeScope(chorusMode_t m) { setDefaultMode(m); }
  ~DefaultModeScope() { setDefaultMode(chorusModeAuto); }
};

TEST(ModeChoice, ChildKeepsItsParentsModeAndDevice) {
  DefaultModeScope scope(chorusModeHost);  // must not matter for a child
  ncclComm parent;
  parent.id.hostMode = false;
  parent.id.cudaDev = 3;
  ModeChoice c;
  ASSERT_EQ(chooseMode(&parent, &c), ncclSuccess);
  EXPECT_FALSE(c.hostMode);
  EXPECT_EQ(c.device, 3);
  parent.id.hostMode = true;
  parent.id.cudaDev = -1;
  ASSERT_EQ(chooseMode(&parent, &c), ncclSuccess);
  EXPECT_TRUE(c.hostMode);
  EXPECT_EQ(c.device, -1);
}

TEST(ModeChoice, HostDefaultGivesHostModeWithoutDevice) {
  DefaultModeScope scope(chorusModeHost);
  ModeChoice c;
  c.hostMode = false;
  c.device = 7;
  ASSERT_EQ(chooseMode(nullptr, &c), ncclSuccess);
  EXPECT_TRUE(c.hostMode);
  EXPECT_EQ(c.device, -1);
}

TEST(ModeChoice, GpuRequestFailsWhereNoGpuIsUsable) {
  std::string why;
  if (gpu::usable(&why)) GTEST_SKIP() << "a GPU is usable here: the request would be met";
  DefaultModeScope scope(chorusModeGpu);
  ModeChoice c;
  EXPECT_EQ(chooseMode(nullptr, &c), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("GPU mode was requested"), std::string::npos) << lastErrorMessage();
}

}  // namespace
}  // namespace chorus::test
