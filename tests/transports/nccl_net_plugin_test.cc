// NCCL's own net plugins (ncclNetPlugin_v6 ... v11) through the adapter:
// each table version moves data, a plugin that rewrites its table in init is
// followed, and broken plugins are refused with a reason naming the file
// while the built-in backends take over. The plugin (tests/transports_plugin/
// nccl_test_net.cc) counts contract violations (unregistered buffers,
// grouped receives, a wrong v11 context); every test here expects none.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "common/tree_paths.h"
#include "core/log.h"
#include "core/result.h"
#include "net_test_util.h"
#include "transports/net/nccl_net_adapter.h"
#include "transports/net/net_backends.h"

namespace chorus::test {
namespace {

const std::string kDir = binaryPath("/tests/transports_plugin/");
std::string plugin(const std::string& variant) { return kDir + "libnccl-net-" + variant + ".so"; }

using EnvList = std::vector<std::pair<std::string, std::string>>;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

long pluginCounter(const std::string& variant, const char* symbol) {
  void* lib = dlopen(plugin(variant).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return -1;
  auto fn = reinterpret_cast<long (*)()>(dlsym(lib, symbol));
  const long v = fn != nullptr ? fn() : -1;
  dlclose(lib);
  return v;
}

const chorusNet_v1_t* loadAndInit(const std::string& variant, int* ndev) {
  const chorusNet_v1_t* net = nullptr;
  EXPECT_EQ(netLoadPlugin(plugin(variant), &net), ncclSuccess) << lastErrorMessage();
  if (net == nullptr) return nullptr;
  EXPECT_EQ(netInitBackend(net, ndev), ncclSuccess) << lastErrorMessage();
  return net;
}

template <class Pred>
bool pollUntil(Pred done, int ms = 5000) {
  for (int i = 0; i < ms; ++i) {
    if (done()) return true;
    usleep(1000);
  }
  return false;
}

// One message each way is not needed: sender -> receiver over one connection,
// with registered buffers, as the proxy does it.
void exchangeOneMessage(const chorusNet_v1_t* net) {
  char handle[CHORUS_NET_HANDLE_BYTES] = {};
  void* lc = nullptr;
  void* sc = nullptr;
  void* rc = nullptr;
  ASSERT_EQ(net->listen(0, handle, &lc), ncclSuccess) << lastErrorMessage();
  ASSERT_TRUE(pollUntil([&] { return net->connect(0, handle, &sc) == ncclSuccess && sc != nullptr; }));
  ASSERT_TRUE(pollUntil([&] { return net->accept(lc, &rc) == ncclSuccess && rc != nullptr; }));
  std::vector<char> out(70000), in(80000, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7 + 1);
  void* smh = nullptr;
  void* rmh = nullptr;
  ASSERT_EQ(net->regMr(sc, out.data(), out.size(), CHORUS_NET_PTR_HOST, &smh), ncclSuccess);
  ASSERT_EQ(net->regMr(rc, in.data(), in.size(), CHORUS_NET_PTR_HOST, &rmh), ncclSuccess);
  void* rreq = nullptr;
  void* sreq = nullptr;
  ASSERT_EQ(net->irecv(rc, in.data(), in.size(), 0, rmh, &rreq), ncclSuccess);
  ASSERT_EQ(net->isend(sc, out.data(), out.size(), 0, smh, &sreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  ASSERT_NE(sreq, nullptr);
  size_t sent = 0, got = 0;
  int sdone = 0, rdone = 0;
  ASSERT_TRUE(pollUntil([&] {
    if (!sdone) {
      EXPECT_EQ(net->test(sreq, &sdone, &sent), ncclSuccess);
    }
    if (!rdone) {
      EXPECT_EQ(net->test(rreq, &rdone, &got), ncclSuccess);
    }
    return sdone && rdone;
  }));
  EXPECT_EQ(sent, out.size());
  EXPECT_EQ(got, out.size());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), in.begin()));
  void* freq = nullptr;
  EXPECT_EQ(net->iflush(rc, in.data(), got, rmh, &freq), ncclSuccess);
  EXPECT_EQ(freq, nullptr);
  EXPECT_EQ(net->deregMr(sc, smh), ncclSuccess);
  EXPECT_EQ(net->deregMr(rc, rmh), ncclSuccess);
  EXPECT_EQ(net->closeSend(sc), ncclSuccess);
  EXPECT_EQ(net->closeRecv(rc), ncclSuccess);
  EXPECT_EQ(net->closeListen(lc), ncclSuccess);
}

struct VersionCase {
  const char* variant;
  const char* name;  // the table Chorus must pick
  int version;
};

class NcclNetVersions : public ::testing::TestWithParam<VersionCase> {};

TEST_P(NcclNetVersions, AdaptedTableMovesData) {
  const VersionCase c = GetParam();
  int ndev = 0;
  const chorusNet_v1_t* net = loadAndInit(c.variant, &ndev);
  ASSERT_NE(net, nullptr);
  EXPECT_STREQ(net->name, c.name);
  EXPECT_EQ(ncclNetAdaptedVersion(net), c.version);
  ASSERT_EQ(ndev, 1);
  chorusNetProperties_v1_t props{};
  ASSERT_EQ(net->getProperties(0, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "testlo");
  EXPECT_EQ(props.ptrSupport, CHORUS_NET_PTR_HOST);
  EXPECT_EQ(props.speedMbps, 10000);
  exchangeOneMessage(net);
  EXPECT_EQ(pluginCounter(c.variant, "ncclTestNetViolations"), 0);
  EXPECT_EQ(pluginCounter(c.variant, "ncclTestNetSends"), 1);
}

INSTANTIATE_TEST_SUITE_P(Tables, NcclNetVersions,
                         ::testing::Values(VersionCase{"v6", "TestNcclNet_v6", 6},
                                           VersionCase{"v11", "TestNcclNet_v11", 11},
                                           VersionCase{"multi", "TestNcclNet_v11", 11},
                                           VersionCase{"rewrite", "TestNcclNet_rewritten", 11}),
                         [](const ::testing::TestParamInfo<VersionCase>& i) { return std::string(i.param.variant); });

TEST(NcclNetPlugin, TableRewrittenInInitIsReadThroughTheSymbol) {
  const chorusNet_v1_t* net = nullptr;
  ASSERT_EQ(netLoadPlugin(plugin("rewrite"), &net), ncclSuccess) << lastErrorMessage();
  // Before init the exported table has only a name and init.
  int ndev = 0;
  ASSERT_EQ(netInitBackend(net, &ndev), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(ndev, 1);
  EXPECT_STREQ(net->name, "TestNcclNet_rewritten");
  // Entries the plugin filled in during init are offered, dma-buf included
  // (the test plugin's regMrDmaBuf refuses every buffer).
  ASSERT_NE(net->regMrDmaBuf, nullptr) << "init gave the table a regMrDmaBuf";
  void* mh = nullptr;
  EXPECT_EQ(net->regMrDmaBuf(nullptr, nullptr, 0, CHORUS_NET_PTR_CUDA, 0, -1, &mh), ncclInvalidUsage);
}

TEST(NcclNetPlugin, FinalizeGetsTheInitContext) {
  int ndev = 0;
  ASSERT_NE(loadAndInit("v11", &ndev), nullptr);
  EXPECT_GE(ncclNetFinalizeAdapted(), 1);
  EXPECT_EQ(pluginCounter("v11", "ncclTestNetViolations"), 0);  // a wrong context would count
}

TEST(NcclNetPlugin, PluginLinesReachTheLoggerWithTheirSubsystem) {
  const std::string logFile = ::testing::TempDir() + "nccl_net_plugin_log.txt";
  std::remove(logFile.c_str());
  {
    ScopedEnv env(EnvList{{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "NET"}, {"NCCL_DEBUG_FILE", logFile}});
    logReset();
    int ndev = 0;
    ASSERT_NE(loadAndInit("v8", &ndev), nullptr);
    EXPECT_EQ(ndev, 1);
  }
  logReset();
  std::ifstream f(logFile);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string log = ss.str();
  EXPECT_TRUE(contains(log, "[TestNcclNet_v8] nccl-test-net: init (table v8)")) << log;
  EXPECT_TRUE(contains(log, "ncclNet_v8 from " + plugin("v8"))) << log;
  EXPECT_TRUE(contains(log, "0:testlo [host, 10000 Mbps, maxRecvs 1]")) << log;
  EXPECT_EQ(chorusSubsysFromNccl(NCCL_NET), kLogNet);
  EXPECT_EQ(chorusSubsysFromNccl(NCCL_INIT | NCCL_BOOTSTRAP), kLogInit | kLogBootstrap);
  EXPECT_EQ(chorusSubsysFromNccl(NCCL_RAS), kLogNet);
}

struct BadCase {
  const char* variant;
  bool loads;          // netLoadPlugin succeeds (the failure shows in init)
  const char* reason;  // part of the error message
};

class NcclNetBadPlugins : public ::testing::TestWithParam<BadCase> {};

TEST_P(NcclNetBadPlugins, RefusedWithTheReasonAndBuiltinsTakeOver) {
  const BadCase c = GetParam();
  const chorusNet_v1_t* net = nullptr;
  const ncclResult_t loaded = netLoadPlugin(plugin(c.variant), &net);
  std::string msg = lastErrorMessage();
  if (loaded == ncclSuccess) {
    EXPECT_TRUE(c.loads) << c.variant;
    int ndev = -1;
    const ncclResult_t inited = netInitBackend(net, &ndev);
    msg = lastErrorMessage();
    EXPECT_TRUE(inited != ncclSuccess || ndev == 0) << c.variant;
  } else {
    EXPECT_FALSE(c.loads) << c.variant << ": " << msg;
  }
  if (c.reason[0] != '\0') {
    EXPECT_TRUE(contains(msg, c.reason)) << msg;
    EXPECT_TRUE(contains(msg, plugin(c.variant))) << msg;
  }
  ScopedEnv env(EnvList{{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET_PLUGIN", plugin(c.variant)}, {"NCCL_NET", ""}});
  const chorusNet_v1_t* chosen = nullptr;
  int ndev = 0;
  ASSERT_EQ(netChooseBackend(&chosen, &ndev), ncclSuccess) << lastErrorMessage();
  EXPECT_STREQ(chosen->name, "Socket");
}

INSTANTIATE_TEST_SUITE_P(Cases, NcclNetBadPlugins,
                         ::testing::Values(BadCase{"v12only", false, "exports only ncclNetPlugin_v12, newer than"},
                                           BadCase{"initfail", true, "init returned error"},
                                           BadCase{"nullfn", true, "entry 'test' is NULL after init"},
                                           BadCase{"propserr", true, "getProperties(0) returned error"},
                                           BadCase{"zerodev", true, ""}),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.variant); });

TEST(NcclNetPlugin, MissingFileAndNameFormsAreReported) {
  const chorusNet_v1_t* net = nullptr;
  EXPECT_NE(netLoadPlugin("nosuchnet", &net), ncclSuccess);
  const std::string msg = lastErrorMessage();
  EXPECT_TRUE(contains(msg, "libnccl-net-nosuchnet.so")) << msg;
  EXPECT_TRUE(contains(msg, "libchorus-net-nosuchnet.so")) << msg;
}

// A plugin whose isend fails: the collective reports an error naming the
// plugin call instead of hanging or crashing.
TEST(NcclNetPluginProcesses, FailingIsendIsAnErrorNotACrash) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"NCCL_SOCKET_IFNAME", "lo"},
              {"NCCL_NET_PLUGIN", plugin("isenderr")},
              {"NCCL_NET", "TestNcclNet_v11"},
              {"CHORUS_TIMEOUT_MS", "3000"}};
  runProcesses(
      2,
      [&](RankCtx& ctx) {
        ncclComm_t comm = nullptr;
        if (!initOnHost(ctx, 1, &comm)) return;
        std::vector<float> buf(1000, 1.0f);
        const ncclResult_t res = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
        if (res == ncclSuccess) ctx.fail("rank %d: the all-reduce succeeded over a plugin whose isend fails", ctx.rank);
        const std::string err = ncclGetLastError(comm);
        if (ctx.rank == 0 && !contains(err, "isend") && !contains(err, "rank"))
          ctx.fail("rank %d: error without a reason: %s", ctx.rank, err.c_str());
        ncclCommAbort(comm);
      },
      opts);
}

// ncclConfig_t.netName picks the backend per communicator: a child split with
// netName "Socket" keeps off the plugin that its parent (no name: the plugin
// comes first) uses.
TEST(NcclNetPluginProcesses, ConfigNetNameChoosesTheBackendPerCommunicator) {
  RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  opts.env = {{"NCCL_SOCKET_IFNAME", "lo"},
              {"NCCL_NET_PLUGIN", plugin("v11")},
              {"NCCL_NET", ""},
              {"CHORUS_TIMEOUT_MS", "15000"}};
  runProcesses(
      2,
      [&](RankCtx& ctx) {
        ncclComm_t parent = nullptr;
        if (!initOnHost(ctx, 1, &parent)) return;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.netName = "Socket";
        ncclComm_t child = nullptr;
        if (!RANK_OK(ctx, ncclCommSplit(parent, 0, ctx.rank, &child, &config))) return;
        std::vector<float> buf(5000, 1.0f);
        RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, child, nullptr));
        if (buf[17] != 2.0f) ctx.fail("rank %d: child sum %g", ctx.rank, buf[17]);
        const long afterChild = pluginCounter("v11", "ncclTestNetSends");
        if (afterChild > 0)
          ctx.fail("rank %d: netName=Socket still sent %ld messages via the plugin", ctx.rank, afterChild);
        RANK_OK(ctx, ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, parent, nullptr));
        if (buf[17] != 4.0f) ctx.fail("rank %d: parent sum %g", ctx.rank, buf[17]);
        // The rank's own result can be complete while its proxy has still to
        // post the last isend of its data: wait for the post, not for the op.
        if (!pollUntil([] { return pluginCounter("v11", "ncclTestNetSends") > 0; }))
          ctx.fail("rank %d: the parent did not use the plugin", ctx.rank);
        RANK_OK(ctx, ncclCommDestroy(child));
        RANK_OK(ctx, ncclCommDestroy(parent));
      },
      opts);
}

}  // namespace
}  // namespace chorus::test
