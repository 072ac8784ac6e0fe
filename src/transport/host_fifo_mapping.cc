#include "transport/host_fifo_mapping.h"

#include <string>

#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus {
namespace {

// Members are destroyed in reverse order: the mapping goes before the memory.
struct MappedHostMemory {
  std::shared_ptr<void> owner;
  std::shared_ptr<void> mapping;
};

}  // namespace

ncclResult_t mapFifoForKernels(const ConnRequest& req, const char* transport, void* hostBase, size_t bytes,
                               std::shared_ptr<void>* memory, char** deviceBase) {
  *deviceBase = nullptr;
  if (!req.deviceMemory) return ncclSuccess;
  std::shared_ptr<void> owner = *memory;
  std::shared_ptr<void> mapping;
  void* device = nullptr;
  ncclResult_t res = gpu::mapHostMemory(hostBase, bytes, &mapping, &device);
  if (res != ncclSuccess) {
    std::string why = lastErrorMessage();
    return fail(res, "%s: %s: cannot make the %zu KiB host FIFO reachable from device %d: %s", transport,
                req.label.c_str(), bytes >> 10, req.selfDevice, why.c_str());
  }
  void* alias = owner.get();
  auto both = std::make_shared<MappedHostMemory>(MappedHostMemory{std::move(owner), std::move(mapping)});
  *memory = std::shared_ptr<void>(std::move(both), alias);
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
