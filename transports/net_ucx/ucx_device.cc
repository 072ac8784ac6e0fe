#include "transports/net_ucx/ucx_device.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>

#include "core/params.h"
#include "core/result.h"
#include "transports/net_ucx/ucx_worker.h"

namespace chorus::ucx {
namespace {

// The registry of discovered devices (at most one), replaced by each init().
struct UcxDeviceRegistry {
  std::mutex mu;
  bool present = false;
  UcxDevice device;
  static UcxDeviceRegistry& get() {
    static auto* registry = new UcxDeviceRegistry;  // never destroyed: property strings stay valid until exit
    return *registry;
  }
};

int readSpeedMbps(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  long speed = 0;
  if (!(in >> speed) || speed <= 0 || speed > INT_MAX) return 0;
  return static_cast<int>(speed);
}

std::string readPciPath(const std::string& ifname) {
  std::string link = "/sys/class/net/" + ifname + "/device";
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  return resolved;
}

}  // namespace

ncclResult_t ucxDiscover(int* ndev) {
  auto& registry = UcxDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.present = false;
  *ndev = 0;
  if (ucpApi() == nullptr) return ncclSuccess;  // ucpApi logged why
  UcxDevice dev;
  if (chooseInterface(params::socketIfname(), &dev.iface) != ncclSuccess) {
    CHORUS_INFO(kLogNet, "NET/UCX: no usable interface for NCCL_SOCKET_IFNAME='%s'; 0 devices",
                params::socketIfname().c_str());
    clearLastError();
    return ncclSuccess;
  }
  dev.pciPath = readPciPath(dev.iface.name);
  dev.speedMbps = readSpeedMbps(dev.iface.name);
  dev.cudaMemory = ucxSupportsCudaMemory();
  CHORUS_INFO(kLogNet | kLogInit, "NET/UCX: device 0 is %s (%s)%s", dev.iface.name.c_str(),
              dev.iface.addr.str().c_str(),
              dev.cudaMemory ? ", CUDA memory supported by UCX (GPU-mode slots still staged: no flush)" : "");
  registry.device = dev;
  registry.present = true;
  *ndev = 1;
  return ncclSuccess;
}

int ucxDeviceCount() {
  auto& registry = UcxDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  return registry.present ? 1 : 0;
}

ncclResult_t ucxDeviceAddress(int dev, SockAddr* addr) {
  auto& registry = UcxDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (!registry.present || dev != 0) return fail(ncclInvalidArgument, "NET/UCX: no device %d", dev);
  *addr = registry.device.iface.addr;
  addr->setPort(0);
  return ncclSuccess;
}

ncclResult_t ucxDeviceProperties(int dev, chorusNetProperties_v1_t* props) {
  if (props == nullptr) return fail(ncclInvalidArgument, "NET/UCX: getProperties: NULL props");
  auto& registry = UcxDeviceRegistry::get();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (!registry.present || dev != 0) return fail(ncclInvalidArgument, "NET/UCX: no device %d", dev);
  // The strings must outlive the call: they point into the registry, which
  // lives until the next init().
  const UcxDevice& d = registry.device;
  *props = chorusNetProperties_v1_t{};
  props->name = d.iface.name.c_str();
  props->pciPath = d.pciPath.empty() ? nullptr : d.pciPath.c_str();
  props->guid = std::hash<std::string>{}(d.pciPath.empty() ? d.iface.name : d.pciPath);
  // Host memory only, even where UCX handles CUDA memory: a receive into
  // device memory over GPUDirect RDMA needs a flush (a read through the NIC)
  // before a kernel may read it, and UCX's tag API offers none (ucxIflush),
  // so GPU-mode slots are staged in host memory.
  props->ptrSupport = CHORUS_NET_PTR_HOST;
  props->speedMbps = d.speedMbps;
  props->port = 1;
  props->latencyUs = 0;
  props->maxComms = 65536;
  props->maxMessageBytes = static_cast<size_t>(INT_MAX);
  return ncclSuccess;
}

}  // namespace chorus::ucx
