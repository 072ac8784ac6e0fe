// The InfiniBand verbs backend's chorusNet_v1_t. See README.md.
#include "transports/net_ib/ib_backend.h"

#include "core/result.h"
#include "transports/net_ib/ib_comm.h"
#include "transports/net_ib/ib_devices.h"

namespace chorus {
namespace {

ncclResult_t ibInit(chorusNetLogFn_t) {
  int ndev = 0;
  return ib::ibDiscover(&ndev);
}

ncclResult_t ibDevices(int* ndev) {
  if (ndev == nullptr) return fail(ncclInvalidArgument, "NET/IB: devices: NULL ndev");
  *ndev = ib::ibDeviceCount();
  return ncclSuccess;
}

chorusNet_v1_t makeTable() {
  chorusNet_v1_t t{};
  t.name = "IB";
  t.version = CHORUS_NET_API_VERSION;
  t.init = ibInit;
  t.devices = ibDevices;
  t.getProperties = ib::ibDeviceProperties;
  t.listen = ib::ibListen;
  t.connect = ib::ibConnect;
  t.accept = ib::ibAccept;
  t.regMr = ib::ibRegMr;
  t.regMrDmaBuf = ib::ibRegMrDmaBuf;
  t.deregMr = ib::ibDeregMr;
  t.isend = ib::ibIsend;
  t.irecv = ib::ibIrecv;
  t.iflush = ib::ibIflush;
  t.test = ib::ibTest;
  t.closeSend = ib::ibCloseSend;
  t.closeRecv = ib::ibCloseRecv;
  t.closeListen = ib::ibCloseListen;
  return t;
}

}  // namespace

const chorusNet_v1_t* netIbBackend() {
  static const chorusNet_v1_t table = makeTable();
  return &table;
}

}  // namespace chorus
