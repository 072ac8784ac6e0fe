#include "transport/host_fifo_mapping.h"

#include <string>

#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus {

ncclResult_t mapFifoForKernels(const ConnRequest& req, const char* transport, void* hostBase, size_t bytes,
                               std::shared_ptr<void>* memory, char** deviceBase) {
  *deviceBase = nullptr;
  if (!req.deviceMemory) return ncclSuccess;
  void* const alias = memory->get();
  std::shared_ptr<void> mapping;
  void* device = nullptr;
  ncclResult_t res = gpu::mapHostMemory(req.selfDevice, hostBase, bytes, *memory, &mapping, &device);
  if (res != ncclSuccess) {
    std::string why = lastErrorMessage();
    return fail(res, "%s: %s: cannot make the %zu KiB host FIFO reachable from device %d: %s", transport,
                req.label.c_str(), bytes >> 10, req.selfDevice, why.c_str());
  }
  *memory = std::shared_ptr<void>(std::move(mapping), alias);  // owns the memory too, released after the mapping
  *deviceBase = static_cast<char*>(device);
  return ncclSuccess;
}

ncclResult_t mapFifoEndForKernels(const ConnRequest& req, const char* transport, FifoEnd* end) {
  char* device = nullptr;
  CHORUS_CHECK(
      mapFifoForKernels(req, transport, end->ctl, fifoTotalBytes(end->slotBytes, end->nslots), &end->memory, &device));
  if (device != nullptr) pointFifoAt(end, device);
  return ncclSuccess;
}

void pointFifoAt(FifoEnd* end, char* base) {
  end->ctl = reinterpret_cast<FifoControl*>(base);
  end->slots = base + fifoControlBytes();
}

}  // namespace chorus
