// The UCX backend's one device: the network interface NCCL_SOCKET_IFNAME
// selects (same rules as the bootstrap). Its address is where listeners bind
// and what handles advertise; UCX itself picks the transports that carry the
// data (UCX_TLS, UCX_NET_DEVICES are read by UCX directly).
#pragma once

#include <string>

#include "bootstrap/socket.h"
#include "chorus/net_plugin.h"
#include "nccl.h"

namespace chorus::ucx {

struct UcxDevice {
  InterfaceInfo iface;
  std::string pciPath;  // empty when the interface has no PCI device (lo, virtual)
  int speedMbps = 0;
  bool cudaMemory = false;
};

// Re-selects the device (called from init). ndev 0 when no interface fits or
// libucp is missing.
ncclResult_t ucxDiscover(int* ndev);
int ucxDeviceCount();
ncclResult_t ucxDeviceAddress(int dev, SockAddr* addr);
ncclResult_t ucxDeviceProperties(int dev, chorusNetProperties_v1_t* props);

}  // namespace chorus::ucx
