// Loading external network backends (NCCL_NET_PLUGIN) and choosing one
// (NCCL_NET): a working plugin carries a collective, and a missing file, a
// library without chorusNetPlugin_v1 or one built for another API version
// give clear errors and leave the built-in backends in charge.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "common/tree_paths.h"
#include "core/result.h"
#include "net_test_util.h"
#include "transports/net/net_backends.h"

namespace chorus::test {
namespace {

const std::string kPluginDir = binaryPath("/tests/transports_plugin/");
const std::string kCounting = kPluginDir + "libchorus-net-counting.so";

using EnvList = std::vector<std::pair<std::string, std::string>>;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(NetPluginLoader, MissingFileIsReportedWithEveryNameTried) {
  const chorusNet_v1_t* net = nullptr;
  EXPECT_NE(netLoadPlugin("nosuchplugin", &net), ncclSuccess);
  const std::string msg = lastErrorMessage();
  EXPECT_TRUE(contains(msg, "cannot load")) << msg;
  EXPECT_TRUE(contains(msg, "libchorus-net-nosuchplugin.so")) << msg;
}

TEST(NetPluginLoader, LibraryWithoutTheSymbolIsRefused) {
  const chorusNet_v1_t* net = nullptr;
  EXPECT_NE(netLoadPlugin(kPluginDir + "libchorus-net-nosymbol.so", &net), ncclSuccess);
  EXPECT_TRUE(contains(lastErrorMessage(), "exports no network plugin table")) << lastErrorMessage();
}

TEST(NetPluginLoader, WrongVersionIsRefused) {
  const chorusNet_v1_t* net = nullptr;
  EXPECT_NE(netLoadPlugin(kPluginDir + "libchorus-net-wrongversion.so", &net), ncclSuccess);
  EXPECT_TRUE(contains(lastErrorMessage(), "version 99")) << lastErrorMessage();
}

TEST(NetPluginLoader, WorkingPluginLoadsOnce) {
  const chorusNet_v1_t* a = nullptr;
  const chorusNet_v1_t* b = nullptr;
  ASSERT_EQ(netLoadPlugin(kCounting, &a), ncclSuccess) << lastErrorMessage();
  ASSERT_EQ(netLoadPlugin(kCounting, &b), ncclSuccess);
  EXPECT_EQ(a, b);
  EXPECT_STREQ(a->name, "CountingSocket");
}

TEST(NetBackendChoice, BrokenPluginFallsBackToBuiltins) {
  for (const char* plugin : {"/nonexistent/libfoo.so", "none"}) {
    ScopedEnv env(EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET_PLUGIN", plugin}, {"NCCL_NET", ""}});
    const chorusNet_v1_t* net = nullptr;
    int ndev = 0;
    ASSERT_EQ(netChooseBackend(&net, &ndev), ncclSuccess) << plugin << ": " << lastErrorMessage();
    EXPECT_STREQ(net->name, "Socket") << plugin;  // no RDMA device on the test machines
    EXPECT_GE(ndev, 1);
  }
}

TEST(NetBackendChoice, UnknownNameListsTheAvailableBackends) {
  ScopedEnv env(EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "carrier-pigeon"}, {"NCCL_NET_PLUGIN", ""}});
  const chorusNet_v1_t* net = nullptr;
  int ndev = 0;
  EXPECT_EQ(netChooseBackend(&net, &ndev), ncclInvalidArgument);
  const std::string msg = lastErrorMessage();
  EXPECT_TRUE(contains(msg, "carrier-pigeon")) << msg;
  EXPECT_TRUE(contains(msg, "Socket")) << msg;
  EXPECT_TRUE(contains(msg, "IB")) << msg;
}

TEST(NetBackendChoice, NameMatchesCaseInsensitivelyAmongPluginAndBuiltins) {
  ScopedEnv env(EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET_PLUGIN", kCounting}, {"NCCL_NET", "SOCKET"}});
  const chorusNet_v1_t* net = nullptr;
  int ndev = 0;
  ASSERT_EQ(netChooseBackend(&net, &ndev), ncclSuccess) << lastErrorMessage();
  EXPECT_STREQ(net->name, "Socket");
  ScopedEnv env2(EnvList{{"NCCL_NET", "countingsocket"}});
  ASSERT_EQ(netChooseBackend(&net, &ndev), ncclSuccess) << lastErrorMessage();
  EXPECT_STREQ(net->name, "CountingSocket");
}

// The plugin, loaded by path, carries a real collective between two "hosts".
TEST(NetPluginProcesses, PluginCarriesTheCollective) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {
      {"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET_PLUGIN", kCounting}, {"NCCL_NET", ""}, {"CHORUS_TIMEOUT_MS", "15000"}};
  runProcesses(
      2,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!initOnHost(ctx, 1, &comm)) return;
        std::vector<float> buf(100000, static_cast<float>(ctx.rank + 1));
        if (RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr))) {
          for (size_t i = 0; i < buf.size(); ++i)
            if (buf[i] != 3.0f) {
              ctx.fail("rank %d: element %zu is %g, expected 3", ctx.rank, i, buf[i]);
              break;
            }
        }
        void* lib = dlopen(kCounting.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (lib == nullptr) {
          ctx.fail("rank %d: the plugin library was never loaded", ctx.rank);
        } else {
          auto isends = reinterpret_cast<long (*)()>(dlsym(lib, "chorusTestPluginIsends"));
          auto irecvs = reinterpret_cast<long (*)()>(dlsym(lib, "chorusTestPluginIrecvs"));
          if (isends == nullptr || irecvs == nullptr || isends() == 0 || irecvs() == 0)
            ctx.fail("rank %d: the plugin's isend/irecv were not used", ctx.rank);
          dlclose(lib);
        }
        RANK_OK(ctx, ncclCommFinalize(comm));
        RANK_OK(ctx, ncclCommDestroy(comm));
      },
      opts);
}

}  // namespace
}  // namespace chorus::test
