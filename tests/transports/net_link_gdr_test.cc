// GPUDirect on a network link (transports/net/net_slot_placement.h, the
// flush in net_link.cc), driven through a fake backend that claims CUDA
// support and records every call. The "device" slots are host memory here:
// the backend only sees addresses and registration types, and the link's
// ordering (a received slot is published only after its iflush completed)
// is what is tested. The GPU run of the same path is in the device check.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "chorus/net_plugin.h"
#include "common/rank_runner.h"
#include "core/result.h"
#include "transports/net/net_link.h"
#include "transports/net/net_slot_placement.h"

namespace chorus::test {
namespace {

// What the fake backend saw, and the requests it holds.
struct FakeState {
  int regType = -1;
  void* regData = nullptr;
  size_t regBytes = 0;
  int dmabufFd = -1;
  uint64_t dmabufOffset = 0;
  std::vector<void*> recvData;
  struct Req {
    bool done = false;
    size_t bytes = 0;
    bool flush = false;
  };
  std::vector<Req> reqs;
  std::vector<std::pair<void*, size_t>> flushes;  // data, size
  bool flushReturnsNull = false;
  bool dmabufFails = false;  // regMrDmaBuf returns an error
  int dmabufCalls = 0;
};
FakeState g;

char gHandles[256];  // request handles: one byte each
void* handleOf(size_t index) { return &gHandles[index]; }
FakeState::Req& reqOf(void* handle) { return g.reqs[static_cast<size_t>(static_cast<char*>(handle) - gHandles)]; }

ncclResult_t props(int, chorusNetProperties_v1_t* p) {
  *p = chorusNetProperties_v1_t{};
  p->name = "fake-gdr0";
  p->ptrSupport = CHORUS_NET_PTR_HOST | CHORUS_NET_PTR_CUDA;
  return ncclSuccess;
}
ncclResult_t accept(void*, void** comm) {
  *comm = reinterpret_cast<void*>(0x1000);
  return ncclSuccess;
}
ncclResult_t closeAny(void*) { return ncclSuccess; }
ncclResult_t regMr(void*, void* data, size_t size, int type, void** mh) {
  g.regType = type;
  g.regData = data;
  g.regBytes = size;
  *mh = reinterpret_cast<void*>(0x2000);
  return ncclSuccess;
}
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mh) {
  ++g.dmabufCalls;
  if (g.dmabufFails) return ncclSystemError;
  g.dmabufFd = fd;
  g.dmabufOffset = offset;
  EXPECT_NE(fcntl(fd, F_GETFD), -1) << "the fd is open while it is registered";
  return regMr(comm, data, size, type, mh);
}
ncclResult_t deregMr(void*, void*) { return ncclSuccess; }
ncclResult_t irecv(void*, void* data, size_t, int, void*, void** req) {
  g.recvData.push_back(data);
  g.reqs.push_back({});
  *req = handleOf(g.reqs.size() - 1);
  return ncclSuccess;
}
ncclResult_t iflush(void*, void* data, size_t size, void*, void** req) {
  g.flushes.emplace_back(data, size);
  if (g.flushReturnsNull) {
    *req = nullptr;
    return ncclSuccess;
  }
  g.reqs.push_back({false, 0, true});
  *req = handleOf(g.reqs.size() - 1);
  return ncclSuccess;
}
ncclResult_t test(void* req, int* done, size_t* size) {
  *done = reqOf(req).done ? 1 : 0;
  if (size != nullptr) *size = reqOf(req).bytes;
  return ncclSuccess;
}

chorusNet_v1_t fakeNet(bool withDmaBuf) {
  chorusNet_v1_t t{};
  t.name = "FakeGdr";
  t.getProperties = props;
  t.accept = accept;
  t.closeListen = closeAny;
  t.closeRecv = closeAny;
  t.closeSend = closeAny;
  t.regMr = regMr;
  t.regMrDmaBuf = withDmaBuf ? regMrDmaBuf : nullptr;
  t.deregMr = deregMr;
  t.irecv = irecv;
  t.iflush = iflush;
  t.test = test;
  return t;
}

ConnRequest request(bool gpu) {
  ConnRequest req;
  req.slotBytes = 1024;
  req.nslots = 4;
  req.deviceMemory = gpu;
  req.selfDevice = 0;
  req.label = "comm test ring ch0 1->0";
  return req;
}

// A GPU-mode receiver link whose slots are registered as device memory.
std::shared_ptr<NetLink> deviceReceiver(const chorusNet_v1_t* net) {
  g = FakeState{};
  auto link = std::make_shared<NetLink>(false, net, "test link");
  link->kernelDriven = true;
  link->listenComm = reinterpret_cast<void*>(0x3000);
  EXPECT_EQ(netAllocFifo(*link, request(false), NetSlotPlan{}), ncclSuccess);
  link->slotPtrType = CHORUS_NET_PTR_CUDA;
  link->flushAfterRecv = true;
  return link;
}

void step(NetLink& link) {
  bool progressed = false, busy = false;
  stepLink(link, &progressed, &busy);
  ASSERT_FALSE(link.failed) << link.health->message;
}

TEST(NetLinkGdr, AcceptRegistersTheSlotsAsDeviceMemory) {
  const chorusNet_v1_t net = fakeNet(false);
  auto link = deviceReceiver(&net);
  step(*link);
  EXPECT_EQ(g.regType, CHORUS_NET_PTR_CUDA);
  EXPECT_EQ(g.regData, link->slots);
  EXPECT_EQ(g.regBytes, 4u * 1024u);
  ASSERT_EQ(g.recvData.size(), 4u);  // a receive posted in every free slot
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(g.recvData[i], link->slot(i));
}

TEST(NetLinkGdr, AReceivedSlotIsPublishedOnlyAfterItsFlushCompleted) {
  const chorusNet_v1_t net = fakeNet(false);
  auto link = deviceReceiver(&net);
  step(*link);
  g.reqs[0] = {true, 100, false};
  step(*link);
  ASSERT_EQ(g.flushes.size(), 1u);
  EXPECT_EQ(g.flushes[0].first, link->slot(0));
  EXPECT_EQ(g.flushes[0].second, 100u);
  for (int i = 0; i < 3; ++i) step(*link);  // the flush is still running
  EXPECT_EQ(link->ctl->tail.load(), 0u);
  g.reqs.back().done = true;
  step(*link);
  EXPECT_EQ(link->ctl->tail.load(), 1u);
  EXPECT_EQ(link->ctl->sizes[0], 100u);
  EXPECT_EQ(g.flushes.size(), 1u);  // one flush per slot
}

TEST(NetLinkGdr, EmptySlotsAndNothingToFlushPublishAtOnce) {
  const chorusNet_v1_t net = fakeNet(false);
  auto link = deviceReceiver(&net);
  step(*link);
  g.reqs[0] = {true, 0, false};  // an empty slot: nothing reached the GPU
  step(*link);
  EXPECT_TRUE(g.flushes.empty());
  EXPECT_EQ(link->ctl->tail.load(), 1u);
  g.flushReturnsNull = true;  // the backend says there is nothing to flush
  g.reqs[1] = {true, 64, false};
  step(*link);
  EXPECT_EQ(g.flushes.size(), 1u);
  EXPECT_EQ(link->ctl->tail.load(), 2u);
  EXPECT_EQ(link->ctl->sizes[1], 64u);
}

TEST(NetLinkGdr, HostSlotsAreNeverFlushed) {
  const chorusNet_v1_t net = fakeNet(false);
  auto link = deviceReceiver(&net);
  link->slotPtrType = CHORUS_NET_PTR_HOST;
  link->flushAfterRecv = false;
  step(*link);
  EXPECT_EQ(g.regType, CHORUS_NET_PTR_HOST);
  g.reqs[0] = {true, 100, false};
  step(*link);
  EXPECT_TRUE(g.flushes.empty());
  EXPECT_EQ(link->ctl->tail.load(), 1u);
}

TEST(NetLinkGdr, DmaBufSlotsAreRegisteredThroughTheFdWhichIsClosedAfter) {
  const chorusNet_v1_t net = fakeNet(true);
  auto link = deviceReceiver(&net);
  link->dmabufFd = open("/dev/null", O_RDONLY);
  ASSERT_GE(link->dmabufFd, 0);
  const int fd = link->dmabufFd;
  link->dmabufOffset = 128;
  step(*link);
  EXPECT_EQ(g.dmabufFd, fd);
  EXPECT_EQ(g.dmabufOffset, 128u);
  EXPECT_EQ(g.regType, CHORUS_NET_PTR_CUDA);  // the memory's type, as NCCL passes it
  EXPECT_EQ(link->dmabufFd, -1);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

TEST(NetLinkGdr, ADmaBufFdWithoutRegMrDmaBufFailsTheLinkAndIsClosed) {
  const chorusNet_v1_t net = fakeNet(false);
  auto link = deviceReceiver(&net);
  link->dmabufFd = open("/dev/null", O_RDONLY);
  const int fd = link->dmabufFd;
  EXPECT_EQ(registerLinkSlots(*link), ncclInternalError);
  EXPECT_NE(std::string(lastErrorMessage()).find("regMrDmaBuf"), std::string::npos);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

TEST(NetLinkGdr, AFailedRegMrDmaBufFallsBackToRegMrWhenTheBackendTakesCudaPointers) {
  const chorusNet_v1_t net = fakeNet(true);
  for (const bool fallback : {true, false}) {
    SCOPED_TRACE(fallback ? "regMr allowed" : "dma-buf only");
    auto link = deviceReceiver(&net);
    g.dmabufFails = true;
    link->regMrFallback = fallback;
    link->dmabufFd = open("/dev/null", O_RDONLY);
    const int fd = link->dmabufFd;
    const ncclResult_t res = registerLinkSlots(*link);
    EXPECT_EQ(g.dmabufCalls, 1);
    EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed either way
    if (fallback) {
      EXPECT_EQ(res, ncclSuccess);
      EXPECT_EQ(g.regType, CHORUS_NET_PTR_CUDA);
      EXPECT_EQ(g.regData, link->slots);
      EXPECT_NE(link->mhandle, nullptr);
    } else {
      EXPECT_EQ(res, ncclSystemError);
      EXPECT_EQ(g.regType, -1);  // regMr never called
    }
  }
}

// The placement from the backend's properties, the GPU's routes and the knobs.
TEST(NetSlotPlacement, ACudaCapableDeviceWithinTheGdrLevelGetsDeviceSlots) {
  const chorusNet_v1_t net = fakeNet(false);
  ConnRequest req = request(true);
  auto routes = std::make_shared<topo::GpuNicRoutes>();
  routes->known = true;
  routes->unlisted = topo::PathType::PHB;  // "fake-gdr0" is not in the topology
  routes->gpuDirectRdma = true;
  req.nicRoutes = routes;
  NetSlotPlan p;
  {
    ScopedEnv env({{"NCCL_NET_GDR_LEVEL", "SYS"}, {"NCCL_NET_GDR_READ", "1"}});
    ASSERT_EQ(netPlaceSlots(req, &net, 0, false, &p), ncclSuccess);
    EXPECT_EQ(p.placement, NetBufferPlacement::DeviceRegMr);
    EXPECT_TRUE(p.flushAfterRecv);
    EXPECT_FALSE(p.regMrFallback);
    ASSERT_EQ(netPlaceSlots(req, &net, 0, true, &p), ncclSuccess);
    EXPECT_EQ(p.placement, NetBufferPlacement::DeviceRegMr);
    EXPECT_FALSE(p.flushAfterRecv);  // senders never flush
  }
  {
    ScopedEnv env({{"NCCL_NET_GDR_LEVEL", "SYS"}, {"NCCL_NET_GDR_READ", "0"}});
    ASSERT_EQ(netPlaceSlots(req, &net, 0, true, &p), ncclSuccess);
    EXPECT_EQ(p.placement, NetBufferPlacement::HostStaged);
  }
  {
    // A GPU without GPUDirect RDMA (GeForce, some virtual GPUs): staged, however near.
    ScopedEnv env({{"NCCL_NET_GDR_LEVEL", "SYS"}, {"NCCL_NET_GDR_READ", "1"}});
    routes->gpuDirectRdma = false;
    ASSERT_EQ(netPlaceSlots(req, &net, 0, false, &p), ncclSuccess);
    EXPECT_EQ(p.placement, NetBufferPlacement::HostStaged);
    EXPECT_FALSE(p.flushAfterRecv);
    routes->gpuDirectRdma = true;
  }
  // The default level (PXB) is nearer than the device's PHB: host staging.
  ASSERT_EQ(netPlaceSlots(req, &net, 0, false, &p), ncclSuccess);
  EXPECT_EQ(p.placement, NetBufferPlacement::HostStaged);
  EXPECT_FALSE(p.flushAfterRecv);
}

TEST(NetSlotPlacement, NoRoutesOrHostModeStage) {
  const chorusNet_v1_t net = fakeNet(false);
  ScopedEnv env({{"NCCL_NET_GDR_LEVEL", "SYS"}, {"NCCL_NET_GDR_READ", "1"}});
  NetSlotPlan p{NetBufferPlacement::DeviceRegMr, true, true};
  ASSERT_EQ(netPlaceSlots(request(true), &net, 0, false, &p), ncclSuccess);  // no routes
  EXPECT_EQ(p.placement, NetBufferPlacement::HostStaged);
  EXPECT_FALSE(p.flushAfterRecv);
  EXPECT_FALSE(p.regMrFallback);
  p.placement = NetBufferPlacement::DeviceRegMr;
  ASSERT_EQ(netPlaceSlots(request(false), &net, 0, false, &p), ncclSuccess);
  EXPECT_EQ(p.placement, NetBufferPlacement::HostStaged);
}

TEST(NetSlotPlacement, ABadGdrLevelIsRefused) {
  const chorusNet_v1_t net = fakeNet(false);
  ScopedEnv env({{"NCCL_NET_GDR_LEVEL", "FAR"}, {"NCCL_NET_GDR_READ", "1"}});
  NetSlotPlan p;
  EXPECT_EQ(netPlaceSlots(request(true), &net, 0, false, &p), ncclInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("NCCL_NET_GDR_LEVEL=FAR"), std::string::npos);
}

TEST(NetSlotPlacement, HostPlacementKeepsTheSlotsAfterTheControlBlock) {
  auto link = std::make_shared<NetLink>(true, nullptr, "test link");
  link->kernelDriven = true;
  ASSERT_EQ(netAllocFifo(*link, request(false), NetSlotPlan{}), ncclSuccess);
  EXPECT_EQ(link->slots, static_cast<char*>(link->fifo.get()) + fifoControlBytes());
  EXPECT_EQ(link->slotPtrType, CHORUS_NET_PTR_HOST);
  EXPECT_EQ(link->deviceSlots, nullptr);
  EXPECT_EQ(link->ctl->nslots, 4u);
}

}  // namespace
}  // namespace chorus::test
