// Buffers registered with ncclCommRegister / ncclCommWindowRegister.
// Both executors read and write user buffers in place and move data between
// ranks through the connector FIFOs: one copy into a slot per hop, none into
// an intermediate user-side staging buffer. A registered buffer also lets a
// point-to-point send go zero-copy where the receiver can read the sender's
// memory by address (same process; in GPU mode also the same GPU): the
// receiver copies straight from it (kernels/common/direct_slot.h).
// Registration is validated (GPU mode: device memory only); every change
// bumps an epoch so cached plans follow it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "nccl.h"

struct ncclWindow_vidmem {
  ncclComm* comm;
  void* base;
  size_t size;
  int flags;
};

namespace chorus {

struct Registration {
  void* base;
  size_t size;
};

class RegistrationTable {
 public:
  ncclResult_t add(void* buff, size_t size, void** handle);
  ncclResult_t remove(void* handle);
  ncclResult_t addWindow(ncclComm* comm, void* buff, size_t size, int flags, ncclWindow_t* win);
  ncclResult_t removeWindow(ncclWindow_t win);
  // Whether [p, p + bytes) lies inside one registered buffer or window.
  bool covers(const void* p, size_t bytes);
  // Changes with every registration and deregistration.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Registration>> regs_;
  std::vector<std::unique_ptr<ncclWindow_vidmem>> windows_;
  std::atomic<uint64_t> epoch_{0};
};

}  // namespace chorus
