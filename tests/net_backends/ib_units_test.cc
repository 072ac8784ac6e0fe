// Device-independent units of the verbs backend (transports/net_ib), plus the
// run-time "no RDMA device" path. Nothing here needs an RDMA device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/rank_runner.h"
#include "transports/net_ib/ib_backend.h"
#include "transports/net_ib/ib_conn_meta.h"
#include "transports/net_ib/ib_hca_filter.h"
#include "transports/net_ib/ib_knobs.h"
#include "transports/net_ib/ib_request_ring.h"
#include "transports/net_ib/ib_sysfs_port.h"

namespace chorus::test {
namespace {

namespace fs = std::filesystem;
using ib::LinkLayer;

// ---- NCCL_IB_HCA -------------------------------------------------------------

TEST(IbHcaFilter, PrefixExactExcludeAndPorts) {
  ib::IbHcaFilter all = ib::IbHcaFilter::parse("");
  EXPECT_TRUE(all.allows("mlx5_0", 1));

  ib::IbHcaFilter prefix = ib::IbHcaFilter::parse("mlx5");
  EXPECT_TRUE(prefix.allows("mlx5_0", 1));
  EXPECT_TRUE(prefix.allows("mlx5_12", 2));
  EXPECT_FALSE(prefix.allows("bnxt_re0", 1));

  ib::IbHcaFilter exact = ib::IbHcaFilter::parse("=mlx5_1");
  EXPECT_TRUE(exact.allows("mlx5_1", 1));
  EXPECT_FALSE(exact.allows("mlx5_10", 1));

  ib::IbHcaFilter ports = ib::IbHcaFilter::parse("mlx5_0:1, mlx5_1");
  EXPECT_TRUE(ports.allows("mlx5_0", 1));
  EXPECT_FALSE(ports.allows("mlx5_0", 2));
  EXPECT_TRUE(ports.allows("mlx5_1", 2));

  ib::IbHcaFilter exclude = ib::IbHcaFilter::parse("^mlx5_0:2");
  EXPECT_TRUE(exclude.allows("mlx5_0", 1));
  EXPECT_FALSE(exclude.allows("mlx5_0", 2));
  ib::IbHcaFilter excludeExact = ib::IbHcaFilter::parse("^=mlx5_1");
  EXPECT_TRUE(excludeExact.exclude && excludeExact.exact);
  EXPECT_FALSE(excludeExact.allows("mlx5_1", 1));
  EXPECT_TRUE(excludeExact.allows("mlx5_10", 1));
}

TEST(IbHcaFilter, MalformedEntriesAreDroppedAndCounted) {
  int malformed = 0;
  ib::IbHcaFilter f = ib::IbHcaFilter::parse("mlx5_0:x,:1,mlx5_2:0,mlx5_3:999,,mlx5_4:2", &malformed);
  EXPECT_EQ(malformed, 4);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].device, "mlx5_4");
  EXPECT_EQ(f.entries[0].port, 2);
}

// ---- GID selection over a sysfs-shaped tree --------------------------------------

class SysfsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/chorus_ib_sysfs_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // RoCE v2 device: link-local v1/v2, a global IPv6 v2, and an IPv4-mapped v2 at index 5.
    port("roce0", 1, "4: ACTIVE", "Ethernet", "0");
    gid("roce0", 1, 0, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "IB/RoCE v1");
    gid("roce0", 1, 1, "fe80:0000:0000:0000:0202:c9ff:fe00:0001", "RoCE v2");
    gid("roce0", 1, 2, "0000:0000:0000:0000:0000:0000:0000:0000", "RoCE v2");
    gid("roce0", 1, 3, "2001:0db8:0000:0000:0000:0000:0000:0007", "RoCE v2");
    gid("roce0", 1, 4, "0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1");
    gid("roce0", 1, 5, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2");
    // Only link-local and v1 entries.
    port("roce1", 1, "4: ACTIVE", "Ethernet", "0");
    gid("roce1", 1, 0, "fe80:0000:0000:0000:0202:c9ff:fe00:0002", "IB/RoCE v1");
    gid("roce1", 1, 1, "fe80:0000:0000:0000:0202:c9ff:fe00:0002", "RoCE v2");
    // InfiniBand device with a LID, port 2 down, and one without a LID.
    port("ib0", 1, "4: ACTIVE", "InfiniBand", "0x1a");
    gid("ib0", 1, 0, "fe80:0000:0000:0000:0002:c903:0000:0001", "");
    port("ib0", 2, "1: DOWN", "InfiniBand", "0x0");
    port("ib1", 1, "4: ACTIVE", "InfiniBand", "0x0");
    // Garbage GID and no GIDs at all.
    port("bad0", 1, "4: ACTIVE", "Ethernet", "0");
    gid("bad0", 1, 0, "not-a-gid", "RoCE v2");
    port("odd0", 1, "4: ACTIVE", "OmniPath", "0");
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  fs::path portDir(const std::string& dev, int port) { return root_ / dev / "ports" / std::to_string(port); }
  void port(const std::string& dev, int p, const std::string& state, const std::string& link, const std::string& lid) {
    write(portDir(dev, p) / "state", state);
    write(portDir(dev, p) / "link_layer", link);
    write(portDir(dev, p) / "lid", lid);
  }
  void gid(const std::string& dev, int p, int index, const std::string& value, const std::string& type) {
    write(portDir(dev, p) / "gids" / std::to_string(index), value);
    if (!type.empty()) write(portDir(dev, p) / "gid_attrs" / "types" / std::to_string(index), type);
  }

  fs::path root_;
};

TEST_F(SysfsFixture, RoceAutoPicksV2Ipv4Mapped) {
  ib::IbPortAddress a;
  ASSERT_EQ(ib::readPortAddress(root_, "roce0", 1, -1, &a), ncclSuccess);
  EXPECT_EQ(a.linkLayer, LinkLayer::Ethernet);
  EXPECT_EQ(a.gidIndex, 5);
  EXPECT_TRUE(a.roceV2);
  EXPECT_TRUE(ib::gidIsIpv4Mapped(a.gid));
  EXPECT_EQ(a.gid[15], 1);
  EXPECT_EQ(a.gid[12], 0x0a);
}

TEST_F(SysfsFixture, RoceFallsBackToV2LinkLocalAndHonoursForcedIndex) {
  ib::IbPortAddress a;
  ASSERT_EQ(ib::readPortAddress(root_, "roce1", 1, -1, &a), ncclSuccess);
  EXPECT_EQ(a.gidIndex, 1);
  EXPECT_TRUE(ib::gidIsLinkLocal(a.gid));
  ASSERT_EQ(ib::readPortAddress(root_, "roce0", 1, 3, &a), ncclSuccess);
  EXPECT_EQ(a.gidIndex, 3);
  EXPECT_EQ(a.gid[0], 0x20);
  EXPECT_EQ(ib::readPortAddress(root_, "roce0", 1, 2, &a), ncclSystemError);   // zero GID
  EXPECT_EQ(ib::readPortAddress(root_, "roce0", 1, 40, &a), ncclSystemError);  // absent
}

TEST_F(SysfsFixture, InfinibandUsesLidAndDownPortsAreRefused) {
  ib::IbPortAddress a;
  ASSERT_EQ(ib::readPortAddress(root_, "ib0", 1, -1, &a), ncclSuccess);
  EXPECT_EQ(a.linkLayer, LinkLayer::InfiniBand);
  EXPECT_EQ(a.lid, 0x1a);
  EXPECT_EQ(ib::readPortAddress(root_, "ib0", 2, -1, &a), ncclSystemError);
  EXPECT_EQ(ib::readPortAddress(root_, "ib1", 1, -1, &a), ncclSystemError);  // no LID
  EXPECT_EQ(ib::readPortAddress(root_, "ib0", 3, -1, &a), ncclSystemError);  // no such port
  EXPECT_EQ(ib::readPortAddress(root_, "bad0", 1, -1, &a), ncclSystemError);
  EXPECT_EQ(ib::readPortAddress(root_, "odd0", 1, -1, &a), ncclSystemError);
  EXPECT_EQ(ib::readPortAddress(root_, "nodev", 1, -1, &a), ncclSystemError);
}

TEST(IbGid, ParseAndClassify) {
  std::array<uint8_t, 16> g{};
  EXPECT_TRUE(ib::parseGid("fe80:0000:0000:0000:0202:c9ff:fe00:0001", &g));
  EXPECT_TRUE(ib::gidIsLinkLocal(g));
  EXPECT_FALSE(ib::gidIsIpv4Mapped(g));
  EXPECT_FALSE(ib::parseGid("fe80::1", &g));
  EXPECT_FALSE(ib::parseGid("fe80:0000:0000:0000:0202:c9ff:fe00:00011", &g));
  EXPECT_FALSE(ib::parseGid("", &g));
}

// ---- Connection records ---------------------------------------------------------

ib::IbConnMeta roceMeta() {
  ib::IbConnMeta m;
  m.qpn = 0x123456;
  m.psn = 0xabcdef;
  m.mtu = 5;
  m.port = 1;
  m.linkLayer = LinkLayer::Ethernet;
  m.gidIndex = 3;
  ib::parseGid("0000:0000:0000:0000:0000:ffff:0a00:0002", &m.gid);
  m.fifoAddr = 0x7f0012345000ull;
  m.fifoRkey = 0xdeadbeef;
  return m;
}

TEST(IbConnMeta, RoundTrip) {
  ib::IbConnMeta in = roceMeta();
  uint8_t bytes[ib::kConnMetaBytes];
  ib::encodeConnMeta(in, bytes);
  ib::IbConnMeta out;
  ASSERT_EQ(ib::decodeConnMeta(bytes, sizeof(bytes), &out), ncclSuccess);
  EXPECT_EQ(out.qpn, in.qpn);
  EXPECT_EQ(out.psn, in.psn);
  EXPECT_EQ(out.mtu, in.mtu);
  EXPECT_EQ(out.port, in.port);
  EXPECT_EQ(out.linkLayer, in.linkLayer);
  EXPECT_EQ(out.gidIndex, in.gidIndex);
  EXPECT_EQ(out.gid, in.gid);
  EXPECT_EQ(out.fifoAddr, in.fifoAddr);
  EXPECT_EQ(out.fifoRkey, in.fifoRkey);
}

TEST(IbConnMeta, MalformedRecordsAreRefused) {
  uint8_t good[ib::kConnMetaBytes];
  ib::encodeConnMeta(roceMeta(), good);
  ib::IbConnMeta out;
  EXPECT_EQ(ib::decodeConnMeta(good, sizeof(good) - 1, &out), ncclRemoteError);
  EXPECT_EQ(ib::decodeConnMeta(nullptr, sizeof(good), &out), ncclRemoteError);
  auto mutate = [&](size_t at, uint8_t value) {
    uint8_t bad[ib::kConnMetaBytes];
    std::memcpy(bad, good, sizeof(bad));
    bad[at] = value;
    return ib::decodeConnMeta(bad, sizeof(bad), &out);
  };
  EXPECT_EQ(mutate(0, 0), ncclRemoteError);  // magic
  EXPECT_EQ(mutate(4, 9), ncclRemoteError);  // version
  EXPECT_EQ(mutate(5, 7), ncclRemoteError);  // link layer
  EXPECT_EQ(mutate(6, 0), ncclRemoteError);  // MTU code
  EXPECT_EQ(mutate(6, 6), ncclRemoteError);
  EXPECT_EQ(mutate(7, 0), ncclRemoteError);   // port
  EXPECT_EQ(mutate(11, 1), ncclRemoteError);  // QPN over 24 bits
  EXPECT_EQ(mutate(15, 1), ncclRemoteError);  // PSN over 24 bits

  ib::IbConnMeta zeroQp = roceMeta();
  zeroQp.qpn = 0;
  uint8_t bytes[ib::kConnMetaBytes];
  ib::encodeConnMeta(zeroQp, bytes);
  EXPECT_EQ(ib::decodeConnMeta(bytes, sizeof(bytes), &out), ncclRemoteError);
  ib::IbConnMeta noGid = roceMeta();
  noGid.gid = {};
  ib::encodeConnMeta(noGid, bytes);
  EXPECT_EQ(ib::decodeConnMeta(bytes, sizeof(bytes), &out), ncclRemoteError);
  ib::IbConnMeta ibNoLid = roceMeta();
  ibNoLid.linkLayer = LinkLayer::InfiniBand;
  ibNoLid.lid = 0;
  ib::encodeConnMeta(ibNoLid, bytes);
  EXPECT_EQ(ib::decodeConnMeta(bytes, sizeof(bytes), &out), ncclRemoteError);
}

// ---- Request ring ---------------------------------------------------------------

TEST(IbRequestRing, InOrderCompletionAndFullRing) {
  ib::IbRequestRing ring(4);
  int a = ring.post(), b = ring.post(), c = ring.post(), d = ring.post();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(d, 3);
  EXPECT_EQ(ring.post(), -1);  // full
  size_t bytes = 0;
  EXPECT_TRUE(ring.finish(c, 30));
  EXPECT_FALSE(ring.tryReport(c, &bytes));  // older ones still running
  EXPECT_TRUE(ring.finish(b, 20));
  EXPECT_FALSE(ring.tryReport(b, &bytes));
  EXPECT_TRUE(ring.finish(a, 10));
  EXPECT_TRUE(ring.tryReport(c, &bytes));  // a, b finished: c may report before them
  EXPECT_EQ(bytes, 30u);
  EXPECT_EQ(ring.post(), -1);  // c's entry is not reusable until a and b are reported
  EXPECT_TRUE(ring.tryReport(a, &bytes));
  EXPECT_EQ(bytes, 10u);
  EXPECT_EQ(ring.outstanding(), 3);
  EXPECT_TRUE(ring.tryReport(b, &bytes));
  EXPECT_EQ(ring.outstanding(), 1);  // a, b, c reclaimed; d still posted
  EXPECT_FALSE(ring.finish(a, 1));   // stray completion of a free entry
  EXPECT_FALSE(ring.finish(-1, 1));
  EXPECT_FALSE(ring.tryReport(d, &bytes));
}

TEST(IbRequestRing, WrapsAroundManyTimes) {
  ib::IbRequestRing ring(ib::kIbSlots);
  uint64_t expectedSeq = 0;
  for (int round = 0; round < 10; ++round) {
    std::vector<int> posted;
    for (int i = 0; i < 20; ++i) {
      uint64_t seq = 0;
      int index = ring.post(&seq);
      ASSERT_GE(index, 0);
      EXPECT_EQ(seq, expectedSeq);
      EXPECT_EQ(index, static_cast<int>(expectedSeq % ib::kIbSlots));
      ++expectedSeq;
      posted.push_back(index);
    }
    for (auto it = posted.rbegin(); it != posted.rend(); ++it) ring.finish(*it, static_cast<size_t>(*it));
    for (auto it = posted.rbegin(); it != posted.rend(); ++it) {
      size_t bytes = 0;
      ASSERT_TRUE(ring.tryReport(*it, &bytes));
      EXPECT_EQ(bytes, static_cast<size_t>(*it));
    }
    EXPECT_EQ(ring.outstanding(), 0);
  }
}

// ---- QP attributes and GDR policy --------------------------------------------------

TEST(IbKnobs, QpAttributesFromKnobsAndRecords) {
  ib::IbQpKnobs knobs;
  ASSERT_EQ(ib::qpKnobsFromValues(18, 5, &knobs), ncclSuccess);
  EXPECT_EQ(ib::qpKnobsFromValues(0, 7, &knobs), ncclInvalidArgument);
  EXPECT_EQ(ib::qpKnobsFromValues(32, 7, &knobs), ncclInvalidArgument);
  EXPECT_EQ(ib::qpKnobsFromValues(20, 8, &knobs), ncclInvalidArgument);
  ASSERT_EQ(ib::qpKnobsFromValues(18, 5, &knobs), ncclSuccess);

  ib::IbConnMeta local = roceMeta(), remote = roceMeta();
  remote.qpn = 77;
  remote.psn = 1234;
  remote.mtu = 3;
  remote.gid[15] = 9;
  ib::IbRtrAttrs rtr;
  ASSERT_EQ(ib::computeRtrAttrs(local, remote, &rtr), ncclSuccess);
  EXPECT_EQ(rtr.pathMtu, 3);
  EXPECT_EQ(rtr.destQpn, 77u);
  EXPECT_EQ(rtr.rqPsn, 1234u);
  EXPECT_TRUE(rtr.global);
  EXPECT_EQ(rtr.dgid, remote.gid);
  EXPECT_EQ(rtr.sgidIndex, local.gidIndex);
  ib::IbRtsAttrs rts = ib::computeRtsAttrs(local, knobs);
  EXPECT_EQ(rts.timeout, 18);
  EXPECT_EQ(rts.retryCnt, 5);
  EXPECT_EQ(rts.sqPsn, local.psn);

  ib::IbConnMeta ibLocal = local, ibRemote = remote;
  ibLocal.linkLayer = ibRemote.linkLayer = LinkLayer::InfiniBand;
  ibRemote.lid = 0x44;
  ASSERT_EQ(ib::computeRtrAttrs(ibLocal, ibRemote, &rtr), ncclSuccess);
  EXPECT_FALSE(rtr.global);
  EXPECT_EQ(rtr.dlid, 0x44);
  EXPECT_EQ(ib::computeRtrAttrs(local, ibRemote, &rtr), ncclRemoteError);  // RoCE vs IB
}

// NCCL_IB_SL / NCCL_IB_TC land in the RTR address vector, within their ranges.
TEST(IbKnobs, ServiceLevelAndTrafficClass) {
  ib::IbRtrAttrs rtr;
  EXPECT_EQ(rtr.serviceLevel, 0);
  EXPECT_EQ(rtr.trafficClass, 0);
  ASSERT_EQ(ib::applyQosKnobs(5, 106, &rtr), ncclSuccess);
  EXPECT_EQ(rtr.serviceLevel, 5);
  EXPECT_EQ(rtr.trafficClass, 106);
  EXPECT_EQ(ib::applyQosKnobs(16, 0, &rtr), ncclInvalidArgument);
  EXPECT_EQ(ib::applyQosKnobs(0, 256, &rtr), ncclInvalidArgument);
  EXPECT_EQ(ib::applyQosKnobs(-1, 0, &rtr), ncclInvalidArgument);
  EXPECT_EQ(rtr.serviceLevel, 5);  // a refused value leaves the attributes alone
}

// NCCL_NET_GDR_LEVEL names topo::PathType values: the five classes
// LOC..SYS by name, or one digit in NCCL's legacy numbering.
TEST(IbKnobs, GdrLevelParsingAndPolicy) {
  using topo::PathType;
  PathType level;
  ASSERT_TRUE(ib::parseGdrLevel("", &level));
  EXPECT_EQ(level, PathType::PXB);
  ASSERT_TRUE(ib::parseGdrLevel("phb", &level));
  EXPECT_EQ(level, PathType::PHB);
  ASSERT_TRUE(ib::parseGdrLevel("SYS", &level));
  EXPECT_EQ(level, PathType::SYS);
  ASSERT_TRUE(ib::parseGdrLevel("loc", &level));
  EXPECT_EQ(level, PathType::LOC);
  ASSERT_TRUE(ib::parseGdrLevel("1", &level));
  EXPECT_EQ(level, PathType::PIX);
  ASSERT_TRUE(ib::parseGdrLevel("3", &level));
  EXPECT_EQ(level, PathType::PHB);
  ASSERT_TRUE(ib::parseGdrLevel("7", &level));  // larger digits: no limit
  EXPECT_EQ(level, PathType::SYS);
  for (const char* bad : {"NVL2", "-1", "NVL", "PXN", "C2C", "NET", "12", "pix "}) {
    level = PathType::DIS;
    EXPECT_FALSE(ib::parseGdrLevel(bad, &level)) << bad;
    EXPECT_EQ(level, PathType::DIS) << bad;  // untouched
  }
  EXPECT_TRUE(ib::gdrAllowed(PathType::PXB, PathType::PIX));
  EXPECT_TRUE(ib::gdrAllowed(PathType::PXB, PathType::PXB));
  EXPECT_FALSE(ib::gdrAllowed(PathType::PXB, PathType::PHB));
  EXPECT_FALSE(ib::gdrAllowed(PathType::PXB, PathType::SYS));
  EXPECT_FALSE(ib::gdrAllowed(PathType::LOC, PathType::LOC));
}

TEST(IbKnobs, PeerMemoryDetectionLooksAtSysfs) {
  char tmpl[] = "/tmp/chorus_ib_peermem_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path root = tmpl;
  EXPECT_FALSE(ib::peerMemoryLoaded(root));
  fs::create_directories(root / "module" / "nvidia_peermem");
  EXPECT_TRUE(ib::peerMemoryLoaded(root));
  fs::remove_all(root / "module");
  fs::create_directories(root / "kernel/mm/memory_peers/nv_mem");
  std::ofstream(root / "kernel/mm/memory_peers/nv_mem/version") << "1.0\n";
  EXPECT_TRUE(ib::peerMemoryLoaded(root));
  fs::remove_all(root);
}

TEST(IbKnobs, DmaBufProbeRefusalsThatMeanNoSupport) {
  EXPECT_FALSE(ib::dmabufProbeMeansSupported(false, EOPNOTSUPP));
  EXPECT_FALSE(ib::dmabufProbeMeansSupported(false, EPROTONOSUPPORT));
  EXPECT_TRUE(ib::dmabufProbeMeansSupported(false, EBADF)) << "the kernel looked at the fd: real ones register";
  EXPECT_TRUE(ib::dmabufProbeMeansSupported(true, 0));
}

// ---- The backend at run time on a machine without RDMA devices ----------------------

TEST(IbBackend, NoRdmaDeviceMeansZeroDevicesCleanly) {
  if (fs::exists("/sys/class/infiniband") && !fs::is_empty("/sys/class/infiniband"))
    GTEST_SKIP() << "this machine has RDMA devices";
  const chorusNet_v1_t* net = netIbBackend();
  EXPECT_STREQ(net->name, "IB");
  EXPECT_EQ(net->version, CHORUS_NET_API_VERSION);
  ASSERT_EQ(net->init(nullptr), ncclSuccess);
  int ndev = -1;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0);
  chorusNetProperties_v1_t props{};
  EXPECT_EQ(net->getProperties(0, &props), ncclInvalidArgument);
  char handle[CHORUS_NET_HANDLE_BYTES] = {};
  void* listenComm = nullptr;
  EXPECT_NE(net->listen(0, handle, &listenComm), ncclSuccess);
  EXPECT_EQ(listenComm, nullptr);
}

TEST(IbBackend, DisableKnobMeansZeroDevices) {
  ScopedEnv env(std::vector<std::pair<std::string, std::string>>{{"NCCL_IB_DISABLE", "1"}});
  const chorusNet_v1_t* net = netIbBackend();
  ASSERT_EQ(net->init(nullptr), ncclSuccess);
  int ndev = -1;
  ASSERT_EQ(net->devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 0);
}

}  // namespace
}  // namespace chorus::test
