// chorus-topo end to end: the report has its three sections for a synthetic
// cluster and a shipped machine file, and bad options fail with a message.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>
#include "common/tree_paths.h"

namespace {

std::string tool() { return chorus::test::binaryPath("/bin/chorus-topo"); }

// Runs the tool; returns stdout+stderr and sets *rc to the exit status.
std::string run(const std::string& args, int* rc) {
  std::string out;
  FILE* p = popen((tool() + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(ChorusTopo, SyntheticClusterReport) {
  if (access(tool().c_str(), X_OK) != 0) GTEST_SKIP() << "chorus-topo not built";
  int rc = -1;
  const std::string out = run("--synthetic nvswitch:4x8 --max 1M --coll all", &rc);
  EXPECT_EQ(rc, 0) << out;
  for (const char* s :
       {"== Topology ==", "== Graph ==", "== Tuner ==", "32 ranks on 4 hosts", "[NIC 0 mlx5_0]", "tree 0: root rank",
        "hier AllReduce: 4 local rings of 8 ranks", "AllGather, 32 ranks", "ring/simple", "1 MiB"})
    EXPECT_NE(out.find(s), std::string::npos) << "missing '" << s << "' in\n" << out;
}

TEST(ChorusTopo, MachineFileAndErrors) {
  if (access(tool().c_str(), X_OK) != 0) GTEST_SKIP() << "chorus-topo not built";
  int rc = -1;
  const std::string file = chorus::test::sourcePath("/tests/topo/files/pcie_8gpu_2socket.xml");
  if (access(file.c_str(), R_OK) == 0) {
    const std::string out = run("--topo " + file + " --max 4K", &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("worst ring hop SYS"), std::string::npos) << out;
  }
  EXPECT_NE(run("--synthetic warp:2x8", &rc).find("unknown shape"), std::string::npos);
  EXPECT_NE(rc, 0);
  EXPECT_NE(run("--frobnicate", &rc).find("unknown option"), std::string::npos);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(run("--help", &rc).find("usage: chorus-topo"), std::string::npos);
  EXPECT_EQ(rc, 0);
}

}  // namespace
