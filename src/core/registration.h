// Buffers registered with ncclCommRegister / ncclCommWindowRegister.
// In host mode the executor stages through connector FIFOs whether or not a
// buffer is registered; registration is validated and tracked so handles
// can be checked and released, and so a later zero-copy path can use it.
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
