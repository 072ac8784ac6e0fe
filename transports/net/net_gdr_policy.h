// Where the network transport puts a GPU connection's FIFO slots: in host
// memory (staged: the backend only ever sees host buffers) or in device
// memory registered with the backend (GPUDirect RDMA), by regMr with
// CHORUS_NET_PTR_CUDA or by regMrDmaBuf. A pure function of the backend
// device's ptrSupport, the topology's GPU-NIC path and the knobs
// NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_READ and NCCL_DMABUF_ENABLE, so it is
// unit-tested without a GPU or NIC. docs/net.md ("GPU memory on the wire").
#pragma once

#include <cstdint>
#include <string>

#include "nccl.h"
#include "topo/topology.h"

namespace chorus {

enum class NetBufferPlacement { HostStaged, DeviceRegMr, DeviceDmaBuf };

struct NetGdrInputs {
  bool gpuBuffers = false;  // the communicator runs in GPU mode
  int ptrSupport = 0;       // chorusNetPtrType_t bits of the backend device
  bool pathKnown = false;   // the topology has a GPU-NIC path for this pair
  topo::PathType gpuToNic = topo::PathType::SYS;
  std::string gdrLevel;           // NCCL_NET_GDR_LEVEL text ("" = PXB)
  int64_t gdrRead = 1;            // NCCL_NET_GDR_READ: 0 keeps sends staged in host memory
  int64_t dmabufEnable = 1;       // NCCL_DMABUF_ENABLE: 0 never uses regMrDmaBuf
  bool dmabufExportable = false;  // the CUDA driver can export the FIFO as a dma-buf fd
  bool backendHasDmaBuf = false;  // the backend's regMrDmaBuf entry is set
  // The GPU supports GPUDirect RDMA (GpuNicRoutes::gpuDirectRdma). A
  // backend's CUDA bit says what the NIC side can do (e.g. nvidia-peermem is
  // loaded); GeForce boards and some virtualized GPUs cannot, and a
  // registration of their memory would fail at connection setup.
  bool gpuDirectRdma = false;
};

struct NetGdrDecision {
  NetBufferPlacement recv = NetBufferPlacement::HostStaged;
  NetBufferPlacement send = NetBufferPlacement::HostStaged;
  bool flushAfterRecv = false;  // iflush must complete before a kernel reads received slots
  bool regMrFallback = false;   // dma-buf chosen, and regMr with CUDA memory may stand in for it
  std::string why;              // for the INFO line
};

// Fills gdrLevel, gdrRead and dmabufEnable from the environment (read at
// connection setup, after any plugin's init may have set them).
void netGdrReadKnobs(NetGdrInputs* in);

// ncclInvalidArgument (with a message) when NCCL_NET_GDR_LEVEL is not a valid level.
ncclResult_t netGdrDecide(const NetGdrInputs& in, NetGdrDecision* out);

const char* netBufferPlacementName(NetBufferPlacement p);

}  // namespace chorus
