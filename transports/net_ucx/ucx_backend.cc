// The UCX backend's chorusNet_v1_t. See README.md for the design.
#include "transports/net_ucx/ucx_backend.h"

#include "core/result.h"
#include "transports/net_ucx/ucx_comm.h"
#include "transports/net_ucx/ucx_device.h"
#include "transports/net_ucx/ucx_request.h"

namespace chorus {
namespace {

ncclResult_t ucxInit(chorusNetLogFn_t) {
  int ndev = 0;
  return ucx::ucxDiscover(&ndev);
}

ncclResult_t ucxDevices(int* ndev) {
  if (ndev == nullptr) return fail(ncclInvalidArgument, "NET/UCX: devices: NULL ndev");
  *ndev = ucx::ucxDeviceCount();
  return ncclSuccess;
}

ncclResult_t ucxRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  // UCX 1.13 registers device memory itself; the dma-buf fd is not needed.
  return ucx::ucxRegMr(comm, data, size, type == CHORUS_NET_PTR_DMABUF ? CHORUS_NET_PTR_CUDA : type, mhandle);
}

chorusNet_v1_t makeTable() {
  chorusNet_v1_t t{};
  t.name = "UCX";
  t.version = CHORUS_NET_API_VERSION;
  t.init = ucxInit;
  t.devices = ucxDevices;
  t.getProperties = ucx::ucxDeviceProperties;
  t.listen = ucx::ucxListen;
  t.connect = ucx::ucxConnect;
  t.accept = ucx::ucxAccept;
  t.regMr = ucx::ucxRegMr;
  t.regMrDmaBuf = ucxRegMrDmaBuf;
  t.deregMr = ucx::ucxDeregMr;
  t.isend = ucx::ucxIsend;
  t.irecv = ucx::ucxIrecv;
  t.iflush = ucx::ucxIflush;
  t.test = ucx::ucxTest;
  t.closeSend = ucx::ucxCloseSend;
  t.closeRecv = ucx::ucxCloseRecv;
  t.closeListen = ucx::ucxCloseListen;
  return t;
}

}  // namespace

const chorusNet_v1_t* netUcxBackend() {
  static const chorusNet_v1_t table = makeTable();
  return &table;
}

}  // namespace chorus
