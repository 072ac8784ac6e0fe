#include "transports/net/net_slot_placement.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/result.h"
#include "gpu/gpu_runtime.h"
#include "transport/host_fifo_mapping.h"

namespace chorus {
namespace {

NetGdrInputs gdrInputs(const ConnRequest& req, const chorusNet_v1_t* net, int dev) {
  NetGdrInputs in;
  in.gpuBuffers = req.deviceMemory;
  chorusNetProperties_v1_t props{};
  if (net->getProperties(dev, &props) == ncclSuccess) {
    in.ptrSupport = props.ptrSupport;
    if (req.nicRoutes != nullptr)
      in.pathKnown = topo::routeToNetDevice(*req.nicRoutes, props.name, props.pciPath, &in.gpuToNic);
  }
  netGdrReadKnobs(&in);
  in.backendHasDmaBuf = net->regMrDmaBuf != nullptr;
  in.gpuDirectRdma = req.nicRoutes != nullptr && req.nicRoutes->gpuDirectRdma;
  in.dmabufExportable =
      req.deviceMemory && (in.ptrSupport & CHORUS_NET_PTR_DMABUF) && gpu::dmabufSupported(req.selfDevice);
  return in;
}

ncclResult_t allocHostFifo(NetLink& link, const ConnRequest& req, size_t slotArea) {
  const size_t bytes = fifoControlBytes() + slotArea;
  void* raw = std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095));
  if (raw == nullptr) return fail(ncclSystemError, "net: cannot allocate %zu bytes for %s", bytes, req.label.c_str());
  if (req.deviceMemory) std::memset(raw, 0, bytes);
  fifoInit(raw, req.slotBytes, req.nslots, getpid());
  link.fifo = std::shared_ptr<void>(raw, [](void* p) { std::free(p); });
  link.ctl = static_cast<FifoControl*>(raw);
  return ncclSuccess;
}

// A dma-buf covers whole host pages: those slots start on a page of their
// own allocation and fill whole pages of it, so the export never reaches
// into memory cudaMalloc may have given to someone else.
ncclResult_t allocDeviceSlots(NetLink& link, const ConnRequest& req, NetBufferPlacement placement, size_t bytes) {
  const bool dmabuf = placement == NetBufferPlacement::DeviceDmaBuf;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t span = dmabuf ? (bytes + page - 1) / page * page + page : bytes;
  void* base = nullptr;
  CHORUS_CHECK(gpu::allocDeviceBuffer(req.selfDevice, span, &link.deviceSlots, &base));
  const uintptr_t at = reinterpret_cast<uintptr_t>(base);
  link.slots = static_cast<char*>(base) + (dmabuf ? (page - at % page) % page : 0);
  // regMrDmaBuf too is told the memory's type, CUDA (as NCCL calls plugins).
  link.slotPtrType = CHORUS_NET_PTR_CUDA;
  if (!dmabuf) return ncclSuccess;
  const ncclResult_t res = gpu::dmabufExport(req.selfDevice, link.slots, (bytes + page - 1) / page * page,
                                             &link.dmabufFd, &link.dmabufOffset);
  if (res == ncclSuccess || !link.regMrFallback) return res;
  CHORUS_WARN(kLogNet, "net: %s: no dma-buf for the device slots (%s): registering them with regMr instead",
              req.label.c_str(), lastErrorMessage());
  clearLastError();
  return ncclSuccess;
}

}  // namespace

ncclResult_t netPlaceSlots(const ConnRequest& req, const chorusNet_v1_t* net, int dev, bool sender, NetSlotPlan* plan) {
  *plan = NetSlotPlan{};
  if (!req.deviceMemory) return ncclSuccess;
  NetGdrDecision d;
  CHORUS_CHECK(netGdrDecide(gdrInputs(req, net, dev), &d));
  plan->placement = sender ? d.send : d.recv;
  plan->flushAfterRecv = !sender && d.flushAfterRecv;
  plan->regMrFallback = plan->placement == NetBufferPlacement::DeviceDmaBuf && d.regMrFallback;
  CHORUS_INFO(kLogNet, "net: %s: %s slots in %s memory (%s)", req.label.c_str(), sender ? "send" : "receive",
              netBufferPlacementName(plan->placement), d.why.c_str());
  return ncclSuccess;
}

// Framed links (host mode) keep a message header in front of every slot.
ncclResult_t netAllocFifo(NetLink& link, const ConnRequest& req, const NetSlotPlan& plan) {
  link.slotBytes = req.slotBytes;
  link.nslots = req.nslots;
  link.flushAfterRecv = plan.flushAfterRecv;
  link.regMrFallback = plan.regMrFallback;
  const size_t slotArea = static_cast<size_t>(link.stride()) * req.nslots;
  const bool onDevice = plan.placement != NetBufferPlacement::HostStaged;
  CHORUS_CHECK(allocHostFifo(link, req, onDevice ? 0 : slotArea));
  if (onDevice) return allocDeviceSlots(link, req, plan.placement, slotArea);
  link.slots = static_cast<char*>(link.fifo.get()) + fifoControlBytes() + (link.stride() - link.slotBytes);
  return ncclSuccess;
}

ncclResult_t netMapEndForKernels(const ConnRequest& req, char* deviceSlots, std::shared_ptr<void> fifo, FifoEnd* end) {
  if (deviceSlots == nullptr) return mapFifoEndForKernels(req, "net", end, std::move(fifo));
  char* ctl = nullptr;
  CHORUS_CHECK(mapFifoForKernels(req, "net", end->ctl, fifoControlBytes(), &end->memory, &ctl, std::move(fifo)));
  end->ctl = reinterpret_cast<FifoControl*>(ctl);
  end->slots = deviceSlots;
  return ncclSuccess;
}

}  // namespace chorus
