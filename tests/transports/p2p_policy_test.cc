// The P2P decision without a GPU: NCCL_P2P_LEVEL parsing (names, NCCL's
// legacy numbers, bad values), NCCL_P2P_DISABLE, the pure allow/deny rule,
// the PCI path estimate from a fake sysfs tree, the MPS pipe probe, the
// handle's validation, and which transport the registry picks for host-mode
// and GPU-mode peers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "core/host_identity.h"
#include "core/result.h"
#include "transport/fifo.h"
#include "transports/p2p/p2p_handle.h"
#include "transports/p2p/p2p_policy.h"

namespace chorus::test {
namespace {

using p2p::P2pLevel;
using p2p::P2pPairFacts;
using p2p::P2pSettings;
using topo::PathType;
using EnvList = std::vector<std::pair<std::string, std::string>>;

P2pLevel parsed(const std::string& text) {
  P2pLevel level;
  std::string why;
  EXPECT_TRUE(p2p::parseP2pLevel(text, &level, &why)) << text << ": " << why;
  return level;
}

TEST(P2pLevel, NamesAreCaseInsensitive) {
  EXPECT_FALSE(parsed("").set);
  EXPECT_EQ(parsed("LOC").max, PathType::LOC);
  EXPECT_EQ(parsed("nvl").max, PathType::NVL);
  EXPECT_EQ(parsed("Pix").max, PathType::PIX);
  EXPECT_EQ(parsed("PXB").max, PathType::PXB);
  EXPECT_EQ(parsed("phb").max, PathType::PHB);
  EXPECT_EQ(parsed("SYS").max, PathType::SYS);
  EXPECT_EQ(parsed("NVB").max, PathType::NVB);
  EXPECT_TRUE(parsed("SYS").set);
}

TEST(P2pLevel, NumbersFollowNcclLegacyNumbering) {
  EXPECT_EQ(parsed("0").max, PathType::LOC);
  EXPECT_EQ(parsed("1").max, PathType::PIX);
  EXPECT_EQ(parsed("2").max, PathType::PXB);
  EXPECT_EQ(parsed("3").max, PathType::PHB);
  EXPECT_EQ(parsed("4").max, PathType::SYS);
  EXPECT_EQ(parsed("5").max, PathType::SYS);
  EXPECT_EQ(parsed("9").max, PathType::SYS);  // NCCL clamps larger numbers
}

TEST(P2pLevel, BadValuesAreRejectedWithAReason) {
  for (const char* bad : {"NET", "DIS", "-1", "fast", "1.5", "PIX ", "0x2", "12345678901"}) {
    P2pLevel level;
    std::string why;
    EXPECT_FALSE(p2p::parseP2pLevel(bad, &level, &why)) << bad;
    EXPECT_FALSE(level.set) << bad;
    EXPECT_NE(why.find("NCCL_P2P_LEVEL"), std::string::npos) << why;
    EXPECT_NE(why.find(bad), std::string::npos) << why;
  }
}

TEST(P2pSettings, BadLevelIsIgnoredWithAWarning) {
  P2pSettings s = p2p::makeP2pSettings(0, "sideways");
  EXPECT_FALSE(s.disabled);
  EXPECT_FALSE(s.level.set);
  EXPECT_NE(s.warning.find("sideways"), std::string::npos);
  s = p2p::makeP2pSettings(1, "PXB");
  EXPECT_TRUE(s.disabled);
  EXPECT_TRUE(s.level.set);
  EXPECT_TRUE(s.warning.empty());
}

TEST(P2pSettings, ReadFromTheEnvironment) {
  {
    ScopedEnv env(EnvList{{"NCCL_P2P_DISABLE", "1"}, {"NCCL_P2P_LEVEL", "NVL"}});
    const P2pSettings s = p2p::currentP2pSettings();
    EXPECT_TRUE(s.disabled);
    EXPECT_EQ(s.level.max, PathType::NVL);
  }
  {
    ScopedEnv env(EnvList{{"NCCL_P2P_DISABLE", "0"}, {"NCCL_P2P_LEVEL", "bogus"}});
    const P2pSettings s = p2p::currentP2pSettings();
    EXPECT_FALSE(s.disabled);
    EXPECT_FALSE(s.level.set);
    EXPECT_FALSE(s.warning.empty());
  }
}

TEST(P2pDecision, DisableWinsEvenOnOneGpu) {
  const P2pSettings off = p2p::makeP2pSettings(1, "");
  std::string why;
  EXPECT_FALSE(p2p::p2pAllowed(off, P2pPairFacts{true, true, PathType::LOC}, &why));
  EXPECT_NE(why.find("NCCL_P2P_DISABLE"), std::string::npos);
  EXPECT_FALSE(p2p::p2pAllowed(off, P2pPairFacts{false, true, PathType::NVL}, nullptr));
}

TEST(P2pDecision, SameGpuIsAlwaysAllowed) {
  for (const char* level : {"", "LOC", "0", "SYS"})
    EXPECT_TRUE(p2p::p2pAllowed(p2p::makeP2pSettings(0, level), P2pPairFacts{true, false, PathType::LOC}, nullptr))
        << level;
}

TEST(P2pDecision, TwoGpusNeedPeerAccess) {
  const P2pSettings def = p2p::makeP2pSettings(0, "");
  std::string why;
  EXPECT_FALSE(p2p::p2pAllowed(def, P2pPairFacts{false, false, PathType::NVL}, &why));
  EXPECT_NE(why.find("cudaDeviceCanAccessPeer"), std::string::npos);
  // Without NCCL_P2P_LEVEL the path does not matter.
  EXPECT_TRUE(p2p::p2pAllowed(def, P2pPairFacts{false, true, PathType::SYS}, nullptr));
}

TEST(P2pDecision, LevelLimitsThePath) {
  std::string why;
  const P2pSettings pxb = p2p::makeP2pSettings(0, "PXB");
  EXPECT_TRUE(p2p::p2pAllowed(pxb, P2pPairFacts{false, true, PathType::NVL}, nullptr));
  EXPECT_TRUE(p2p::p2pAllowed(pxb, P2pPairFacts{false, true, PathType::PIX}, nullptr));
  EXPECT_TRUE(p2p::p2pAllowed(pxb, P2pPairFacts{false, true, PathType::PXB}, nullptr));
  EXPECT_FALSE(p2p::p2pAllowed(pxb, P2pPairFacts{false, true, PathType::PHB}, &why));
  EXPECT_NE(why.find("PHB"), std::string::npos);
  EXPECT_NE(why.find("PXB"), std::string::npos);
  const P2pSettings loc = p2p::makeP2pSettings(0, "LOC");
  EXPECT_FALSE(p2p::p2pAllowed(loc, P2pPairFacts{false, true, PathType::NVL}, nullptr));
  const P2pSettings nvl = p2p::makeP2pSettings(0, "NVL");
  EXPECT_TRUE(p2p::p2pAllowed(nvl, P2pPairFacts{false, true, PathType::NVL}, nullptr));
  EXPECT_FALSE(p2p::p2pAllowed(nvl, P2pPairFacts{false, true, PathType::PIX}, nullptr));
  // A level never grants access the hardware does not give.
  EXPECT_FALSE(p2p::p2pAllowed(p2p::makeP2pSettings(0, "SYS"), P2pPairFacts{false, false, PathType::NVL}, nullptr));
}

PeerInfo gpuPeer(int rank, uint64_t host, uint64_t token, int dev) {
  PeerInfo p;
  p.rank = rank;
  p.pid = getpid();
  p.hostHash = host;
  p.processToken = token;
  p.cudaDev = dev;
  p.hostMode = 0;
  return p;
}

TEST(P2pDecision, CandidatesAreGpuRanksOfOneHost) {
  EXPECT_TRUE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), gpuPeer(1, 1, 2, 1)));
  EXPECT_TRUE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), gpuPeer(1, 1, 1, 0)));
  EXPECT_FALSE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), gpuPeer(1, 2, 2, 0)));  // other host
  EXPECT_FALSE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), gpuPeer(1, 1, 2, -1)));
  PeerInfo host = gpuPeer(1, 1, 2, 0);
  host.hostMode = 1;
  EXPECT_FALSE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), host));
  EXPECT_FALSE(p2p::p2pCandidates(host, gpuPeer(0, 1, 1, 0)));
  // Processes that see different GPUs (CUDA_VISIBLE_DEVICES) never pair by
  // P2P: one could see the other's GPU and the other not, and each decides alone.
  PeerInfo seesMore = gpuPeer(1, 1, 2, 1);
  seesMore.visibleGpus = 42;
  EXPECT_FALSE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), seesMore));
  EXPECT_FALSE(p2p::p2pCandidates(seesMore, gpuPeer(0, 1, 1, 0)));
  PeerInfo sameProcess = gpuPeer(1, 1, 1, 1);
  sameProcess.visibleGpus = 42;  // one process sees one set: never differs in practice, and never matters
  EXPECT_TRUE(p2p::p2pCandidates(gpuPeer(0, 1, 1, 0), sameProcess));
}

TEST(P2pPath, PciTreeClasses) {
  const std::string sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";  // root port, switch upstream port
  // Two GPUs below one switch.
  EXPECT_EQ(p2p::pciPathClass(sw + "/0000:02:00.0/0000:03:00.0", sw + "/0000:02:01.0/0000:04:00.0", 0, 0),
            PathType::PIX);
  // One GPU behind a second switch level.
  EXPECT_EQ(p2p::pciPathClass(sw + "/0000:02:00.0/0000:03:00.0/0000:04:00.0/0000:05:00.0",
                              sw + "/0000:02:01.0/0000:06:00.0", 0, 0),
            PathType::PXB);
  // Different root ports of one host bridge.
  EXPECT_EQ(p2p::pciPathClass("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
                              "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0", 0, 0),
            PathType::PHB);
  // Different host bridges: same NUMA node PHB, else SYS.
  const std::string a = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
  const std::string b = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0";
  EXPECT_EQ(p2p::pciPathClass(a, b, 0, 0), PathType::PHB);
  EXPECT_EQ(p2p::pciPathClass(a, b, 0, 1), PathType::SYS);
  EXPECT_EQ(p2p::pciPathClass(a, b, -1, -1), PathType::PHB);
  // Unknown paths fall back to the NUMA nodes.
  EXPECT_EQ(p2p::pciPathClass("", b, 1, 1), PathType::PHB);
  EXPECT_EQ(p2p::pciPathClass(a, "", 0, 1), PathType::SYS);
  EXPECT_EQ(p2p::pciPathClass("/not/a/pci/path", "/nor/this", 0, 0), PathType::PHB);
}

class P2pFakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chorus-p2p-sysfs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_EQ(system(("mkdir -p " + root_ + "/bus/pci/devices").c_str()), 0);
  }
  void TearDown() override {
    if (!root_.empty()) (void)system(("rm -rf " + root_).c_str());
  }
  // Creates the device directory below /devices and its /bus/pci/devices link.
  void addDevice(const std::string& chain, int numa) {
    const std::string dir = root_ + "/devices/" + chain;
    ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
    std::ofstream(dir + "/numa_node") << numa << "\n";
    const std::string id = chain.substr(chain.rfind('/') + 1);
    ASSERT_EQ(symlink(dir.c_str(), (root_ + "/bus/pci/devices/" + id).c_str()), 0);
  }
  std::string root_;
};

TEST_F(P2pFakeSysfs, BusIdsAreResolvedThroughSysfs) {
  addDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0);
  addDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0);
  addDevice("pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  // CUDA spells bus ids in upper case, with a 4- or 8-digit domain.
  EXPECT_EQ(p2p::pciPathFromSysfs("0000:03:00.0", "00000000:04:00.0", root_), PathType::PIX);
  EXPECT_EQ(p2p::pciPathFromSysfs("0000:03:00.0", "0000:81:00.0", root_), PathType::SYS);
  // An unknown device: decided by the NUMA nodes (one unknown: SYS).
  EXPECT_EQ(p2p::pciPathFromSysfs("0000:03:00.0", "0000:99:00.0", root_), PathType::SYS);
  EXPECT_EQ(p2p::pciPathFromSysfs("garbage", "0000:99:00.0", root_), PathType::PHB);
}

TEST_F(P2pFakeSysfs, MpsPipeProbe) {
  {
    ScopedEnv env(EnvList{{"CUDA_MPS_PIPE_DIRECTORY", root_}});
    EXPECT_FALSE(p2p::mpsControlPipePresent());
    std::ofstream(root_ + "/control") << "";
    EXPECT_TRUE(p2p::mpsControlPipePresent());
  }
}

ConnRequest request(uint32_t slotBytes, uint32_t nslots) {
  ConnRequest r;
  r.selfRank = 0;
  r.peerRank = 1;
  r.slotBytes = slotBytes;
  r.nslots = nslots;
  r.deviceMemory = true;
  r.selfDevice = 0;
  r.label = "comm test ring ch0 1->0";
  return r;
}

p2p::P2pHandle goodHandle() {
  p2p::P2pHandle h;
  h.ownerPid = 1234;
  h.device = 0;
  h.processToken = 42;
  h.pointer = 0x7f0000000000ull;
  h.slotBytes = 4096;
  h.nslots = 4;
  h.totalBytes = fifoTotalBytes(4096, 4);
  snprintf(h.busId, sizeof(h.busId), "0000:17:00.0");
  return h;
}

TEST(P2pHandle, RoundTrips) {
  std::vector<uint8_t> bytes;
  p2p::encodeP2pHandle(goodHandle(), &bytes);
  EXPECT_EQ(bytes.size(), sizeof(p2p::P2pHandle));
  p2p::P2pHandle out;
  ASSERT_EQ(p2p::decodeP2pHandle(bytes, request(4096, 4), &out), ncclSuccess) << lastErrorMessage();
  EXPECT_EQ(out.pointer, goodHandle().pointer);
  EXPECT_STREQ(out.busId, "0000:17:00.0");
}

ncclResult_t decodeMutated(void (*mutate)(p2p::P2pHandle&, std::vector<uint8_t>&), const ConnRequest& req) {
  p2p::P2pHandle h = goodHandle();
  std::vector<uint8_t> bytes;
  p2p::encodeP2pHandle(h, &bytes);
  mutate(h, bytes);
  p2p::P2pHandle out;
  clearLastError();
  return p2p::decodeP2pHandle(bytes, req, &out);
}

void reencode(const p2p::P2pHandle& h, std::vector<uint8_t>& bytes) { p2p::encodeP2pHandle(h, &bytes); }

TEST(P2pHandle, ValidationFailuresAreClearErrors) {
  const ConnRequest req = request(4096, 4);
  EXPECT_EQ(decodeMutated([](p2p::P2pHandle&, std::vector<uint8_t>& b) { b.resize(3); }, req), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("3 bytes"), std::string::npos) << lastErrorMessage();
  EXPECT_EQ(decodeMutated([](p2p::P2pHandle&, std::vector<uint8_t>& b) { b.pop_back(); }, req), ncclInternalError);
  EXPECT_EQ(decodeMutated(
                [](p2p::P2pHandle& h, std::vector<uint8_t>& b) {
                  h.magic = 0x12345678;
                  reencode(h, b);
                },
                req),
            ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("not a P2P handle"), std::string::npos) << lastErrorMessage();
  // A shm path (what the other rank would send if it chose shm) is not a P2P handle either.
  EXPECT_EQ(decodeMutated(
                [](p2p::P2pHandle&, std::vector<uint8_t>& b) {
                  const std::string path = "/dev/shm/chorus-1-2-3-4";
                  b.assign(path.begin(), path.end());
                },
                req),
            ncclInternalError);
  EXPECT_EQ(decodeMutated(
                [](p2p::P2pHandle& h, std::vector<uint8_t>& b) {
                  h.version = 99;
                  reencode(h, b);
                },
                req),
            ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("version"), std::string::npos) << lastErrorMessage();
  EXPECT_EQ(decodeMutated([](p2p::P2pHandle&, std::vector<uint8_t>&) {}, request(8192, 4)), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("CHORUS_SLOT_BYTES"), std::string::npos) << lastErrorMessage();
  EXPECT_NE(std::string(lastErrorMessage()).find("comm test ring"), std::string::npos) << lastErrorMessage();
  EXPECT_EQ(decodeMutated([](p2p::P2pHandle&, std::vector<uint8_t>&) {}, request(4096, 8)), ncclInvalidUsage);
  EXPECT_EQ(decodeMutated(
                [](p2p::P2pHandle& h, std::vector<uint8_t>& b) {
                  h.totalBytes = 1;
                  reencode(h, b);
                },
                req),
            ncclInternalError);
  EXPECT_EQ(decodeMutated(
                [](p2p::P2pHandle& h, std::vector<uint8_t>& b) {
                  for (char& c : h.busId) c = 'x';
                  reencode(h, b);
                },
                req),
            ncclInternalError);
  EXPECT_EQ(decodeMutated(
                [](p2p::P2pHandle& h, std::vector<uint8_t>& b) {
                  h.pointer = 0;
                  reencode(h, b);
                },
                req),
            ncclInternalError);
}

// Registry order: host-mode ranks never get p2p; GPU ranks get p2p first in
// CUDA builds (same GPU: no device query needed) and the host-memory
// transports when P2P is disabled or the build has no CUDA.
TEST(P2pRegistry, TransportChoice) {
  PeerInfo hostSelf = gpuPeer(0, 7, processToken(), 0), hostPeer = gpuPeer(1, 7, processToken(), 0);
  hostSelf.hostMode = hostPeer.hostMode = 1;
  ASSERT_NE(selectTransport(hostSelf, hostPeer), nullptr);
  EXPECT_STREQ(selectTransport(hostSelf, hostPeer)->name(), "inproc");
  PeerInfo hostOther = hostPeer;
  hostOther.processToken = processToken() + 1;
  EXPECT_STREQ(selectTransport(hostSelf, hostOther)->name(), "shm");

  const PeerInfo self = gpuPeer(0, 7, processToken(), 0), samePeer = gpuPeer(1, 7, processToken(), 0);
  const PeerInfo otherProcess = gpuPeer(1, 7, processToken() + 1, 0);
  {
    ScopedEnv env(EnvList{{"NCCL_P2P_DISABLE", "0"}});
#if CHORUS_HAVE_CUDA
    EXPECT_STREQ(transportRegistry().front()->name(), "p2p");
    EXPECT_STREQ(selectTransport(self, samePeer)->name(), "p2p");
    EXPECT_STREQ(selectTransport(self, otherProcess)->name(), "p2p");
#else
    EXPECT_STREQ(selectTransport(self, samePeer)->name(), "inproc");
    EXPECT_STREQ(selectTransport(self, otherProcess)->name(), "shm");
#endif
  }
  {
    ScopedEnv env(EnvList{{"NCCL_P2P_DISABLE", "1"}});
    EXPECT_STREQ(selectTransport(self, samePeer)->name(), "inproc");
    EXPECT_STREQ(selectTransport(self, otherProcess)->name(), "shm");
  }
  {
    ScopedEnv env(EnvList{{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}});
    EXPECT_STREQ(selectTransport(self, otherProcess)->name(), "net");
  }
}

}  // namespace
}  // namespace chorus::test
