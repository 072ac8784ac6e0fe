// RDMA devices the verbs backend offers: one per active port that
// NCCL_IB_HCA allows, with its addressing (ib_sysfs_port.h) and a protection
// domain shared by every connection on it. No libibverbs, NCCL_IB_DISABLE=1,
// a build without verbs.h, or no device at all: 0 devices and an INFO line.
#pragma once

#include <string>

#include "chorus/net_plugin.h"
#include "nccl.h"
#include "transports/net_ib/ib_sysfs_port.h"

#ifdef CHORUS_HAVE_IBVERBS
#include "transports/net_ib/ib_verbs_api.h"
#endif

namespace chorus::ib {

struct IbDevice {
  std::string name;  // "mlx5_0:1"
  std::string deviceName;
  int port = 1;
  IbPortAddress addr;
  int mtu = 5;  // IBV_MTU_* of the port
  int speedMbps = 0;
  std::string pciPath;
  uint64_t guid = 0;
  int ptrSupport = CHORUS_NET_PTR_HOST;
#ifdef CHORUS_HAVE_IBVERBS
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
#endif
};

// Re-scans (init). Never fails for lack of devices.
ncclResult_t ibDiscover(int* ndev);
int ibDeviceCount();
// The device, or nullptr (with an ncclInvalidArgument message) when absent.
// The pointer stays valid for the life of the process.
const IbDevice* ibDevice(int dev);
ncclResult_t ibDeviceProperties(int dev, chorusNetProperties_v1_t* props);

}  // namespace chorus::ib
