// chorusrun's placement plan: one core per local process, all hardware
// threads of that core, never more processes than cores.
#include "launcher/cpu_binding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using chorusrun::BindMode;
using Cores = std::vector<std::vector<int>>;

// Two hardware threads per core numbered as Linux does on x86: cpu c and
// c + half share a core.
std::string smtSiblings(int cpu, int half) {
  const int first = cpu % half;
  return std::to_string(first) + "," + std::to_string(first + half);
}

TEST(CpuBinding, GroupsHardwareThreadsOfOneCore) {
  const Cores cores = chorusrun::groupByCore({0, 1, 2, 3, 4, 5, 6, 7}, [](int c) { return smtSiblings(c, 4); });
  EXPECT_EQ(cores, (Cores{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(CpuBinding, KeepsOnlyAllowedThreadsOfACore) {
  // As under `taskset -c 0,1,4`: core 0 keeps both threads, core 1 one.
  const Cores cores = chorusrun::groupByCore({0, 1, 4}, [](int c) { return smtSiblings(c, 4); });
  EXPECT_EQ(cores, (Cores{{0, 4}, {1}}));
}

TEST(CpuBinding, RangesAndUnreadableListsInSysfs) {
  const Cores cores = chorusrun::groupByCore({0, 1, 2, 3, 9}, [](int c) -> std::string {
    if (c == 9) return "";  // no topology: the CPU alone
    return c < 2 ? "0-1" : "2-3";
  });
  EXPECT_EQ(cores, (Cores{{0, 1}, {2, 3}, {9}}));
}

TEST(CpuBinding, OneCorePerProcessWhenTheyFit) {
  const Cores cores{{0, 4}, {1, 5}, {2, 6}};
  EXPECT_EQ(chorusrun::planBinding(BindMode::kCore, 2, cores), (Cores{{0, 4}, {1, 5}}));
  EXPECT_EQ(chorusrun::planBinding(BindMode::kCore, 3, cores), cores);
}

TEST(CpuBinding, NoBindingWhenOversubscribedOrOff) {
  const Cores cores{{0}, {1}};
  EXPECT_EQ(chorusrun::planBinding(BindMode::kCore, 4, cores), (Cores{{}, {}, {}, {}}));
  EXPECT_EQ(chorusrun::planBinding(BindMode::kNone, 2, cores), (Cores{{}, {}}));
}

TEST(CpuBinding, ParsesModesAndPrintsLists) {
  BindMode mode = BindMode::kNone;
  EXPECT_TRUE(chorusrun::parseBindMode("core", &mode));
  EXPECT_EQ(mode, BindMode::kCore);
  EXPECT_TRUE(chorusrun::parseBindMode("none", &mode));
  EXPECT_EQ(mode, BindMode::kNone);
  EXPECT_FALSE(chorusrun::parseBindMode("socket", &mode));
  EXPECT_EQ(chorusrun::cpuListText({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

}  // namespace
