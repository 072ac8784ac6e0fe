#include "transports/net/net_gdr_policy.h"

#include "chorus/net_plugin.h"
#include "core/params.h"
#include "core/result.h"
#include "topo/path_level.h"

namespace chorus {
namespace {

NetBufferPlacement devicePlacement(const NetGdrInputs& in, std::string* why) {
  if ((in.ptrSupport & CHORUS_NET_PTR_DMABUF) && in.dmabufEnable != 0 && in.dmabufExportable && in.backendHasDmaBuf) {
    *why = "GPUDirect RDMA through a dma-buf";
    return NetBufferPlacement::DeviceDmaBuf;
  }
  if (in.ptrSupport & CHORUS_NET_PTR_CUDA) {
    *why = "GPUDirect RDMA through peer memory";
    return NetBufferPlacement::DeviceRegMr;
  }
  *why = (in.ptrSupport & CHORUS_NET_PTR_DMABUF) ? "the backend takes device memory only as a dma-buf, and "
                                                   "NCCL_DMABUF_ENABLE=0 or no dma-buf can be exported: host staging"
                                                 : "the backend takes host memory only: host staging";
  return NetBufferPlacement::HostStaged;
}

}  // namespace

const char* netBufferPlacementName(NetBufferPlacement p) {
  switch (p) {
    case NetBufferPlacement::DeviceRegMr:
      return "device (regMr)";
    case NetBufferPlacement::DeviceDmaBuf:
      return "device (regMrDmaBuf)";
    default:
      return "host";
  }
}

void netGdrReadKnobs(NetGdrInputs* in) {
  in->gdrLevel = params::netGdrLevel();
  in->gdrRead = params::netGdrRead();
  in->dmabufEnable = params::dmabufEnable();
}

ncclResult_t netGdrDecide(const NetGdrInputs& in, NetGdrDecision* out) {
  topo::PathType level = topo::PathType::PXB;
  if (!in.gdrLevel.empty() && !topo::parsePathLevel(in.gdrLevel, topo::kGdrLevelSyntax, &level))
    return fail(ncclInvalidArgument, "net: NCCL_NET_GDR_LEVEL=%s is not one of %s", in.gdrLevel.c_str(),
                topo::pathLevelNames(topo::kGdrLevelSyntax).c_str());
  NetGdrDecision d;
  if (!in.gpuBuffers) {
    d.why = "host mode: host buffers";
  } else if (!in.pathKnown) {
    d.why = "no GPU-NIC path in the topology: host staging";
  } else if (level == topo::PathType::LOC || in.gpuToNic > level) {
    d.why = std::string("GPU-NIC path ") + topo::pathTypeName(in.gpuToNic) + " is farther than NCCL_NET_GDR_LEVEL " +
            topo::pathTypeName(level) + ": host staging";
  } else if (!in.gpuDirectRdma) {
    d.why = "the GPU does not support GPUDirect RDMA: host staging";
  } else {
    d.recv = devicePlacement(in, &d.why);
    if (d.recv != NetBufferPlacement::HostStaged) {
      d.flushAfterRecv = true;
      d.regMrFallback = d.recv == NetBufferPlacement::DeviceDmaBuf && (in.ptrSupport & CHORUS_NET_PTR_CUDA);
      d.send = in.gdrRead != 0 ? d.recv : NetBufferPlacement::HostStaged;
      if (in.gdrRead == 0) d.why += "; sends staged in host memory (NCCL_NET_GDR_READ=0)";
    }
  }
  *out = d;
  return ncclSuccess;
}

}  // namespace chorus
