#include "transports/net_ib/ib_devices.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>

#include "core/params.h"
#include "core/result.h"
#include "transports/net_ib/ib_hca_filter.h"
#include "transports/net_ib/ib_knobs.h"

namespace chorus::ib {
namespace {

// The registry of discovered devices. Devices are never freed (connections
// may still point at them); a re-scan appends to `all` and replaces `active`.
struct IbDeviceRegistry {
  std::mutex mu;
  std::deque<IbDevice> all;
  std::vector<const IbDevice*> active;
  static IbDeviceRegistry& get() {
    static IbDeviceRegistry registry;
    return registry;
  }
};

#ifdef CHORUS_HAVE_IBVERBS
int laneMbps(int speedCode) {
  switch (speedCode) {
    case 1:
      return 2500;
    case 2:
      return 5000;
    case 4:
    case 8:
      return 10000;
    case 16:
      return 14000;
    case 32:
      return 25000;
    case 64:
      return 50000;
    case 128:
      return 100000;
    default:
      return 0;
  }
}

int lanes(int widthCode) {
  switch (widthCode) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 1;
  }
}

// rdma-core may export ibv_reg_dmabuf_mr while the kernel or the NIC's driver
// cannot register a dma-buf: ask with an invalid fd, as a real registration
// would only fail later, at connection setup.
bool kernelTakesDmaBuf(const VerbsApi* api, ibv_pd* pd) {
  if (api->regDmabufMr == nullptr) return false;
  errno = 0;
  ibv_mr* mr = api->regDmabufMr(pd, 0, 0, 0, -1, 0);
  const int err = errno;
  if (mr != nullptr) api->deregMr(mr);
  return dmabufProbeMeansSupported(mr != nullptr, err);
}

int gpuPointerSupport(const VerbsApi* api, ibv_pd* pd) {
  topo::PathType level = topo::PathType::PXB;
  if (!parseGdrLevel(params::netGdrLevel(), &level)) {
    CHORUS_WARN(kLogNet, "NET/IB: ignoring unparsable NCCL_NET_GDR_LEVEL=%s", params::netGdrLevel().c_str());
    level = topo::PathType::PXB;
  }
  if (level == topo::PathType::LOC) return 0;
  int bits = 0;
  if (peerMemoryLoaded("/sys")) bits |= CHORUS_NET_PTR_CUDA;
  if (kernelTakesDmaBuf(api, pd)) bits |= CHORUS_NET_PTR_DMABUF;
  return bits;
}

void addPorts(const VerbsApi* api, ibv_device* device, const IbHcaFilter& filter, IbDeviceRegistry* registry) {
  std::string devName = api->getDeviceName(device);
  ibv_context* context = api->openDevice(device);
  ibv_device_attr attr{};
  if (context == nullptr || api->queryDevice(context, &attr) != 0) {
    CHORUS_INFO(kLogNet, "NET/IB: cannot open or query %s; skipped", devName.c_str());
    if (context != nullptr) api->closeDevice(context);
    return;
  }
  ibv_pd* pd = nullptr;
  for (int port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr portAttr{};
    IbDevice d;
    if (!filter.allows(devName, port) || api->queryPort(context, static_cast<uint8_t>(port), &portAttr) != 0 ||
        portAttr.state != IBV_PORT_ACTIVE)
      continue;
    if (readPortAddress(params::ibSysfsRoot(), devName, port, static_cast<int>(params::ibGidIndex()), &d.addr) !=
        ncclSuccess) {
      CHORUS_INFO(kLogNet, "NET/IB: %s:%d skipped: %s", devName.c_str(), port, lastErrorMessage());
      continue;
    }
    if (pd == nullptr && (pd = api->allocPd(context)) == nullptr) break;
    d.deviceName = devName;
    d.name = devName + ":" + std::to_string(port);
    d.port = port;
    d.mtu = portAttr.active_mtu;
    d.speedMbps = laneMbps(portAttr.active_speed) * lanes(portAttr.active_width);
    char resolved[PATH_MAX];
    std::string link = "/sys/class/infiniband/" + devName + "/device";
    if (realpath(link.c_str(), resolved) != nullptr) d.pciPath = resolved;
    d.guid = attr.sys_image_guid;
    d.ptrSupport = CHORUS_NET_PTR_HOST | gpuPointerSupport(api, pd);
    d.context = context;
    d.pd = pd;
    registry->all.push_back(d);
    registry->active.push_back(&registry->all.back());
    CHORUS_INFO(kLogNet | kLogInit, "NET/IB: device %zu is %s (%s, %d Mbps)", registry->active.size() - 1,
                d.name.c_str(), d.addr.linkLayer == LinkLayer::Ethernet ? "RoCE" : "InfiniBand", d.speedMbps);
  }
  if (pd == nullptr) api->closeDevice(context);
}

void scanVerbs(IbDeviceRegistry* registry) {
  const VerbsApi* api = verbsApi();
  if (api == nullptr) return;  // verbsApi logged why
  int count = 0;
  ibv_device** list = api->getDeviceList(&count);
  if (list == nullptr || count == 0) {
    CHORUS_INFO(kLogNet, "NET/IB: no RDMA device found; verbs backend has 0 devices");
    if (list != nullptr) api->freeDeviceList(list);
    return;
  }
  int malformed = 0;
  IbHcaFilter filter = IbHcaFilter::parse(params::ibHca(), &malformed);
  if (malformed > 0) CHORUS_WARN(kLogNet, "NET/IB: ignored %d malformed NCCL_IB_HCA entries", malformed);
  for (int i = 0; i < count; ++i) addPorts(api, list[i], filter, registry);
  api->freeDeviceList(list);
  if (registry->active.empty()) CHORUS_INFO(kLogNet, "NET/IB: no active RDMA port passed NCCL_IB_HCA; 0 devices");
}
#endif  // CHORUS_HAVE_IBVERBS

}  // namespace

ncclResult_t ibDiscover(int* ndev) {
  auto& registry = IbDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.active.clear();
  if (params::ibDisable() != 0) {
    CHORUS_INFO(kLogNet, "NET/IB: disabled by NCCL_IB_DISABLE");
  } else {
#ifdef CHORUS_HAVE_IBVERBS
    scanVerbs(&registry);
#else
    CHORUS_INFO(kLogNet, "NET/IB: built without verbs.h; no RDMA devices");
#endif
  }
  *ndev = static_cast<int>(registry.active.size());
  return ncclSuccess;
}

int ibDeviceCount() {
  auto& registry = IbDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  return static_cast<int>(registry.active.size());
}

const IbDevice* ibDevice(int dev) {
  auto& registry = IbDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (dev < 0 || dev >= static_cast<int>(registry.active.size())) {
    fail(ncclInvalidArgument, "NET/IB: no device %d (%zu RDMA devices)", dev, registry.active.size());
    return nullptr;
  }
  return registry.active[static_cast<size_t>(dev)];
}

ncclResult_t ibDeviceProperties(int dev, chorusNetProperties_v1_t* props) {
  if (props == nullptr) return fail(ncclInvalidArgument, "NET/IB: getProperties: NULL props");
  const IbDevice* d = ibDevice(dev);
  if (d == nullptr) return ncclInvalidArgument;
  *props = chorusNetProperties_v1_t{};
  props->name = d->name.c_str();
  props->pciPath = d->pciPath.empty() ? nullptr : d->pciPath.c_str();
  props->guid = d->guid != 0 ? d->guid : std::hash<std::string>{}(d->deviceName);
  props->ptrSupport = d->ptrSupport;
  props->speedMbps = d->speedMbps;
  props->port = d->port;
  props->maxComms = 65536;
  props->maxMessageBytes = static_cast<size_t>(1) << 30;
  return ncclSuccess;
}

}  // namespace chorus::ib
