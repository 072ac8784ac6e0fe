// CommTopology: assembled from hand-made inputs, and built by real
// communicator init (threads, forked processes posing as two hosts, a
// topology file, the dump file, the network overrides).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/rank_runner.h"
#include "common/tree_paths.h"
#include "core/comm.h"
#include "core/result.h"
#include "topo/comm_build.h"
#include "topo/comm_topology.h"
#include "topo/xml_read.h"

namespace chorus::topo {
namespace {

using chorus::test::RankCtx;
using EnvList = std::vector<std::pair<std::string, std::string>>;

std::string shipped(const char* name) { return chorus::test::sourcePath("/tests/topo/files/") + name; }

Topology load(const char* name) {
  Topology t;
  EXPECT_EQ(loadTopologyXml(shipped(name), &t), ncclSuccess);
  return t;
}

TEST(AssembleCommTopology, TwoNvSwitchHostsOfGpuRanks) {
  std::vector<RankInput> ranks;
  for (int r = 0; r < 16; ++r) ranks.push_back(RankInput{r < 8 ? 0xaaull : 0xbbull, r % 8, 0, false});
  CommTopology ct = assembleCommTopology(ranks, {load("nvswitch_8gpu_8nic.xml"), load("nvswitch_8gpu_8nic.xml")});
  ASSERT_EQ(ct.nhosts(), 2);
  ASSERT_EQ(ct.nranks(), 16);
  EXPECT_EQ(ct.hostHashes, (std::vector<uint64_t>{0xaa, 0xbb}));
  EXPECT_EQ(ct.ranksOnHost(1), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(ct.ranks[11].localRank, 3);
  EXPECT_EQ(ct.ranks[11].device, ct.hosts[1].findGpu(3));
  EXPECT_EQ(ct.hosts[1].nodes[ct.ranks[11].device].rank, 11);
  EXPECT_EQ(ct.pathBetween(0, 8), PathType::NET);
  EXPECT_EQ(ct.pathBetween(15, 2), PathType::NET);
  EXPECT_EQ(ct.pathBetween(0, 7), PathType::NVL);
  EXPECT_EQ(ct.pathBetween(9, 9), PathType::LOC);
  EXPECT_DOUBLE_EQ(ct.netBwGBs, 50.0);  // 400 Gb/s NICs
  EXPECT_DOUBLE_EQ(ct.bwBetween(0, 8), 50.0);
  EXPECT_DOUBLE_EQ(ct.bwBetween(0, 1), 18 * bw::kNvLinkPerLink(90));
}

TEST(AssembleCommTopology, HostModeRanksSitOnTheirNumaNode) {
  std::vector<RankInput> ranks = {{1, -1, 0, true}, {1, -1, 0, true}, {1, -1, 1, true}, {2, -1, 7, true}};
  Topology small;
  Node cpu;
  cpu.type = NodeType::Cpu;
  cpu.numa = 0;
  cpu.cores = 4;
  small.addNode(cpu);
  CommTopology ct = assembleCommTopology(ranks, {load("pcie_8gpu_2socket.xml"), small});
  ASSERT_EQ(ct.nhosts(), 2);
  const Topology& h0 = ct.hosts[0];
  EXPECT_EQ(h0.nodes[ct.ranks[0].device].type, NodeType::Cpu);
  EXPECT_EQ(h0.nodes[ct.ranks[2].device].numa, 1);
  EXPECT_EQ(ct.pathBetween(0, 1), PathType::LOC);
  EXPECT_EQ(ct.pathBetween(0, 2), PathType::SYS);
  EXPECT_EQ(ct.pathBetween(2, 3), PathType::NET);
  EXPECT_DOUBLE_EQ(ct.bwBetween(0, 1), bw::kHostMemcpy);
  EXPECT_DOUBLE_EQ(ct.bwBetween(0, 2), std::min(bw::kSmpIntel, bw::kHostMemcpy));
  EXPECT_EQ(ct.hosts[1].nodes[ct.ranks[3].device].numa, 0);  // unknown NUMA 7: first CPU node
  EXPECT_DOUBLE_EQ(ct.netBwGBs, 12.5);                       // slowest host's fastest NIC: 100 Gb/s (host 1 has none)
}

TEST(AssembleCommTopology, MissingGpuFallsBackToCpu) {
  std::vector<RankInput> ranks = {{1, 3, 0, false}, {1, 9, 1, false}};
  CommTopology ct = assembleCommTopology(ranks, {load("nvlink_4gpu_pairwise.xml")});
  EXPECT_EQ(ct.hosts[0].nodes[ct.ranks[0].device].type, NodeType::Gpu);
  EXPECT_EQ(ct.hosts[0].nodes[ct.ranks[1].device].type, NodeType::Cpu);
  EXPECT_EQ(ct.pathBetween(0, 1), PathType::PHB);
}

TEST(NetOverrides, ParsedAndValidated) {
  CommTopology ct;
  {
    chorus::test::ScopedEnv env(EnvList{{"CHORUS_NET_BW_GBS", "1.25"}, {"CHORUS_NET_LATENCY_US", "40"}});
    ASSERT_EQ(applyNetOverrides(&ct), ncclSuccess);
    EXPECT_DOUBLE_EQ(ct.netBwGBs, 1.25);
    EXPECT_DOUBLE_EQ(ct.netLatencyUs, 40);
  }
  chorus::test::ScopedEnv env(EnvList{{"CHORUS_NET_BW_GBS", "fast"}});
  EXPECT_EQ(applyNetOverrides(&ct), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("CHORUS_NET_BW_GBS"), std::string::npos);
}

TEST(CommInit, ThreadsOnOneHostShareOneTopology) {
  chorus::test::useHostMode();
  chorus::test::runInitAll(3, [](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
    for (int r = 0; r < 3; ++r) {
      const CommTopology* ct = comms[r]->topology.get();
      if (ct == nullptr) return ctx.fail("rank %d has no topology", r);
      if (ct->nhosts() != 1 || ct->nranks() != 3) ctx.fail("rank %d: %d hosts %d ranks", r, ct->nhosts(), ct->nranks());
      if (ct->hosts[0].nodesOfType(NodeType::Cpu).empty()) ctx.fail("no CPU node");
      for (int p = 0; p < 3; ++p) {
        if (ct->ranks[p].host != 0 || ct->ranks[p].localRank != p) ctx.fail("rank %d placed badly", p);
        if (ct->hosts[0].nodes[ct->ranks[p].device].type != NodeType::Cpu) ctx.fail("rank %d not on a CPU", p);
        if (ct->pathBetween(0, p) == PathType::NET || ct->pathBetween(0, p) == PathType::DIS)
          ctx.fail("rank 0 -> %d: %s", p, pathTypeName(ct->pathBetween(0, p)));
      }
    }
  });
}

// Two "hosts" (NCCL_HOSTID differs) in forked processes: the topologies cross
// the bootstrap as XML; host B runs from a topology file.
void twoHostBody(RankCtx& ctx) {
  bool hostB = ctx.rank >= 2;
  setenv("NCCL_HOSTID", hostB ? "topo-test-host-b" : "topo-test-host-a", 1);
  if (hostB) setenv("NCCL_TOPO_FILE", shipped("pcie_8gpu_2socket.xml").c_str(), 1);
  chorus::test::useHostMode();
  ncclComm_t comm = nullptr;
  if (!RANK_OK(ctx, ncclCommInitRank(&comm, ctx.nranks, ctx.id, ctx.rank))) return;
  const CommTopology* ct = comm->topology.get();
  if (ct == nullptr) {
    ctx.fail("rank %d: no topology", ctx.rank);
  } else {
    if (ct->nhosts() != 2) ctx.fail("rank %d sees %d hosts", ctx.rank, ct->nhosts());
    if (ct->pathBetween(0, 3) != PathType::NET || ct->pathBetween(1, 2) != PathType::NET)
      ctx.fail("rank %d: cross-host path is not NET", ctx.rank);
    if (ct->pathBetween(2, 3) == PathType::NET || ct->pathBetween(0, 1) == PathType::NET)
      ctx.fail("rank %d: same-host path is NET", ctx.rank);
    if (ct->nhosts() == 2 && ct->hosts[1].nodesOfType(NodeType::Gpu).size() != 8)
      ctx.fail("rank %d: host B has %zu GPUs, want the file's 8", ctx.rank,
               ct->hosts[1].nodesOfType(NodeType::Gpu).size());
    if (ct->ranks[3].localRank != 1) ctx.fail("rank 3 local rank %d", ct->ranks[3].localRank);
    if (ct->netBwGBs <= 0) ctx.fail("net bandwidth %f", ct->netBwGBs);
  }
  RANK_OK(ctx, ncclCommDestroy(comm));
}

TEST(CommInit, TwoHostsInProcessesExchangeTopologies) {
  chorus::test::RunOptions opts;
  opts.initComms = false;
  opts.timeoutMs = 60000;
  chorus::test::runProcesses(4, twoHostBody, opts);
}

TEST(CommInit, TopoFileAndDumpFile) {
  std::string dump = chorus::test::binaryPath("/topo_dump_") + std::to_string(getpid()) + "_%h.xml";
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string written = dump.substr(0, dump.size() - 6) + host + ".xml";
  std::remove(written.c_str());
  {
    chorus::test::ScopedEnv env(
        EnvList{{"NCCL_TOPO_FILE", shipped("nvlink_4gpu_pairwise.xml")}, {"NCCL_TOPO_DUMP_FILE", dump}});
    chorus::test::useHostMode();
    chorus::test::runInitAll(2, [](RankCtx& ctx, std::vector<ncclComm_t>& comms) {
      const CommTopology* ct = comms[1]->topology.get();
      if (ct == nullptr || ct->hosts[0].nodesOfType(NodeType::Gpu).size() != 4) ctx.fail("file not used");
    });
  }
  Topology back;
  ASSERT_EQ(loadTopologyXml(written, &back), ncclSuccess);
  EXPECT_EQ(back.nodesOfType(NodeType::Gpu).size(), 4u);
  EXPECT_EQ(back.path(back.findGpu(0), back.findGpu(3)).type, PathType::NVL);
  std::remove(written.c_str());
}

TEST(CommInit, BadTopoFileFailsInit) {
  chorus::test::ScopedEnv env(EnvList{{"NCCL_TOPO_FILE", "/nonexistent/topo.xml"}});
  chorus::test::useHostMode();
  ncclComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("/nonexistent/topo.xml"), std::string::npos);
}

}  // namespace
}  // namespace chorus::topo
