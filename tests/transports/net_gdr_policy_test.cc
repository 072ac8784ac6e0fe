// Where a GPU connection's FIFO slots live (transports/net/net_gdr_policy.h),
// decided from a fake backend that claims CUDA (and dma-buf) support, the
// GPU-NIC path and the GDR knobs. No GPU or NIC is needed.
#include <gtest/gtest.h>

#include "chorus/net_plugin.h"
#include "common/rank_runner.h"
#include "core/result.h"
#include "transports/net/net_gdr_policy.h"

namespace chorus::test {
namespace {

using topo::PathType;

// A backend whose only device claims GPUDirect support.
ncclResult_t fakeProps(int, chorusNetProperties_v1_t* p) {
  *p = chorusNetProperties_v1_t{};
  p->name = "fake-gdr";
  p->ptrSupport = CHORUS_NET_PTR_HOST | CHORUS_NET_PTR_CUDA | CHORUS_NET_PTR_DMABUF;
  return ncclSuccess;
}
ncclResult_t fakeDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclSuccess; }

chorusNet_v1_t fakeBackend() {
  chorusNet_v1_t t{};
  t.name = "FakeGdr";
  t.getProperties = fakeProps;
  t.regMrDmaBuf = fakeDmaBuf;
  return t;
}

NetGdrInputs gpuInputs(const chorusNet_v1_t& net, PathType path, bool dmabufExportable = false) {
  chorusNetProperties_v1_t props{};
  EXPECT_EQ(net.getProperties(0, &props), ncclSuccess);
  NetGdrInputs in;
  in.gpuBuffers = true;
  in.ptrSupport = props.ptrSupport;
  in.backendHasDmaBuf = net.regMrDmaBuf != nullptr;
  in.dmabufExportable = dmabufExportable;
  in.pathKnown = true;
  in.gpuToNic = path;
  in.gpuDirectRdma = true;
  return in;
}

NetGdrDecision decide(const NetGdrInputs& in) {
  NetGdrDecision d;
  EXPECT_EQ(netGdrDecide(in, &d), ncclSuccess) << lastErrorMessage();
  return d;
}

TEST(NetGdrPolicy, HostModeAlwaysStages) {
  NetGdrInputs in = gpuInputs(fakeBackend(), PathType::PIX);
  in.gpuBuffers = false;
  const NetGdrDecision d = decide(in);
  EXPECT_EQ(d.recv, NetBufferPlacement::HostStaged);
  EXPECT_EQ(d.send, NetBufferPlacement::HostStaged);
  EXPECT_FALSE(d.flushAfterRecv);
}

TEST(NetGdrPolicy, CudaCapableBackendOnACloseNicRegistersDeviceMemoryAndFlushes) {
  const NetGdrDecision d = decide(gpuInputs(fakeBackend(), PathType::PIX));
  EXPECT_EQ(d.recv, NetBufferPlacement::DeviceRegMr) << d.why;
  EXPECT_EQ(d.send, NetBufferPlacement::DeviceRegMr);
  EXPECT_TRUE(d.flushAfterRecv);
}

TEST(NetGdrPolicy, GdrLevelAgainstThePath) {
  const chorusNet_v1_t net = fakeBackend();
  EXPECT_EQ(decide(gpuInputs(net, PathType::PXB)).recv, NetBufferPlacement::DeviceRegMr);  // default PXB
  EXPECT_EQ(decide(gpuInputs(net, PathType::PHB)).recv, NetBufferPlacement::HostStaged);
  EXPECT_EQ(decide(gpuInputs(net, PathType::SYS)).recv, NetBufferPlacement::HostStaged);
  NetGdrInputs sys = gpuInputs(net, PathType::SYS);
  sys.gdrLevel = "SYS";
  EXPECT_EQ(decide(sys).recv, NetBufferPlacement::DeviceRegMr);
  sys.gdrLevel = "4";  // NCCL's legacy numbering
  EXPECT_EQ(decide(sys).recv, NetBufferPlacement::DeviceRegMr);
  NetGdrInputs loc = gpuInputs(net, PathType::LOC);
  loc.gdrLevel = "LOC";  // disables GPUDirect RDMA
  const NetGdrDecision d = decide(loc);
  EXPECT_EQ(d.recv, NetBufferPlacement::HostStaged);
  EXPECT_NE(d.why.find("NCCL_NET_GDR_LEVEL"), std::string::npos) << d.why;
  NetGdrInputs unknown = gpuInputs(net, PathType::PIX);
  unknown.pathKnown = false;
  EXPECT_EQ(decide(unknown).recv, NetBufferPlacement::HostStaged);
}

TEST(NetGdrPolicy, DmaBufPreferredWhenEnabledAndExportable) {
  const chorusNet_v1_t net = fakeBackend();
  NetGdrInputs in = gpuInputs(net, PathType::PIX, /*dmabufExportable=*/true);
  EXPECT_EQ(decide(in).recv, NetBufferPlacement::DeviceDmaBuf);
  EXPECT_TRUE(decide(in).regMrFallback);  // the backend takes CUDA pointers too
  in.dmabufEnable = 0;
  EXPECT_EQ(decide(in).recv, NetBufferPlacement::DeviceRegMr);
  EXPECT_FALSE(decide(in).regMrFallback);                       // regMr already
  in.ptrSupport = CHORUS_NET_PTR_HOST | CHORUS_NET_PTR_DMABUF;  // dma-buf only, but disabled
  EXPECT_EQ(decide(in).recv, NetBufferPlacement::HostStaged);
  in.dmabufEnable = 1;
  EXPECT_EQ(decide(in).recv, NetBufferPlacement::DeviceDmaBuf);
  EXPECT_FALSE(decide(in).regMrFallback);  // dma-buf or nothing
  in.backendHasDmaBuf = false;             // claims the bit, has no entry
  EXPECT_EQ(decide(in).recv, NetBufferPlacement::HostStaged);
}

TEST(NetGdrPolicy, GdrReadOffStagesOnlySends) {
  NetGdrInputs in = gpuInputs(fakeBackend(), PathType::PIX);
  in.gdrRead = 0;
  const NetGdrDecision d = decide(in);
  EXPECT_EQ(d.recv, NetBufferPlacement::DeviceRegMr);
  EXPECT_EQ(d.send, NetBufferPlacement::HostStaged);
  EXPECT_TRUE(d.flushAfterRecv);
}

TEST(NetGdrPolicy, AGpuWithoutGpuDirectRdmaStagesWhateverTheBackendClaims) {
  NetGdrInputs in = gpuInputs(fakeBackend(), PathType::PIX, /*dmabufExportable=*/true);
  in.gpuDirectRdma = false;
  const NetGdrDecision d = decide(in);
  EXPECT_EQ(d.recv, NetBufferPlacement::HostStaged);
  EXPECT_EQ(d.send, NetBufferPlacement::HostStaged);
  EXPECT_FALSE(d.flushAfterRecv);
  EXPECT_NE(d.why.find("GPUDirect RDMA"), std::string::npos) << d.why;
}

TEST(NetGdrPolicy, HostOnlyBackendStages) {
  NetGdrInputs in = gpuInputs(fakeBackend(), PathType::PIX);
  in.ptrSupport = CHORUS_NET_PTR_HOST;
  EXPECT_EQ(decide(in).recv, NetBufferPlacement::HostStaged);
}

TEST(NetGdrPolicy, KnobsComeFromTheEnvironmentAndBadLevelsAreRefused) {
  ScopedEnv env({{"NCCL_NET_GDR_LEVEL", "PHB"}, {"NCCL_NET_GDR_READ", "0"}, {"NCCL_DMABUF_ENABLE", "0"}});
  NetGdrInputs in = gpuInputs(fakeBackend(), PathType::PHB, true);
  netGdrReadKnobs(&in);
  EXPECT_EQ(in.gdrLevel, "PHB");
  EXPECT_EQ(in.gdrRead, 0);
  EXPECT_EQ(in.dmabufEnable, 0);
  const NetGdrDecision d = decide(in);
  EXPECT_EQ(d.recv, NetBufferPlacement::DeviceRegMr);
  EXPECT_EQ(d.send, NetBufferPlacement::HostStaged);
  in.gdrLevel = "NVL";  // a P2P level, not a GDR one
  NetGdrDecision bad;
  EXPECT_EQ(netGdrDecide(in, &bad), ncclInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_NET_GDR_LEVEL=NVL"), std::string::npos);
}

}  // namespace
}  // namespace chorus::test
