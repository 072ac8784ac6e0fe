// Buffers registered with ncclCommRegister / ncclCommWindowRegister.
// Both executors read and write user buffers in place and move data between
// ranks through the connector FIFOs (one copy into a slot per hop, none into
// an intermediate user-side staging buffer), whether or not a buffer is
// registered. Registration is validated (GPU mode: device memory only) and
// tracked so handles can be checked and released; a zero-copy path that
// reads a peer's registered buffer directly is not built yet.
#pragma once

#include <cstddef>
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

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Registration>> regs_;
  std::vector<std::unique_ptr<ncclWindow_vidmem>> windows_;
};

}  // namespace chorus
