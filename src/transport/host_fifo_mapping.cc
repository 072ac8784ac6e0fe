#include "transport/host_fifo_mapping.h"

#include <string>

#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus {
namespace {

// What a mapped end keeps: the handle the transport gave it (released with
// the end) and the mapping (released once the device is idle, together with
// the host memory it covers).
struct MappedEnd {
  std::shared_ptr<void> handle;
  std::shared_ptr<void> mapping;
};

}  // namespace

ncclResult_t mapFifoForKernels(const ConnRequest& req, const char* transport, void* hostBase, size_t bytes,
                               std::shared_ptr<void>* memory, char** deviceBase, std::shared_ptr<void> hostMemory) {
  *deviceBase = nullptr;
  if (!req.deviceMemory) return ncclSuccess;
  void* const alias = memory->get();
  std::shared_ptr<void> mapping;
  void* device = nullptr;
  ncclResult_t res = gpu::mapHostMemory(req.selfDevice, hostBase, bytes, hostMemory ? std::move(hostMemory) : *memory,
                                        &mapping, &device);
  if (res != ncclSuccess) {
    std::string why = lastErrorMessage();
    return fail(res, "%s: %s: cannot make the %zu KiB host FIFO reachable from device %d: %s", transport,
                req.label.c_str(), bytes >> 10, req.selfDevice, why.c_str());
  }
  *memory =
      std::shared_ptr<void>(std::make_shared<MappedEnd>(MappedEnd{std::move(*memory), std::move(mapping)}), alias);
  *deviceBase = static_cast<char*>(device);
  return ncclSuccess;
}

ncclResult_t mapFifoEndForKernels(const ConnRequest& req, const char* transport, FifoEnd* end,
                                  std::shared_ptr<void> hostMemory) {
  char* device = nullptr;
  CHORUS_CHECK(mapFifoForKernels(req, transport, end->ctl, fifoTotalBytes(end->slotBytes, end->nslots), &end->memory,
                                 &device, std::move(hostMemory)));
  if (device != nullptr) pointFifoAt(end, device);
  return ncclSuccess;
}

void pointFifoAt(FifoEnd* end, char* base) {
  end->ctl = reinterpret_cast<FifoControl*>(base);
  end->slots = base + fifoControlBytes();
}

}  // namespace chorus
