#include "core/registration.h"

#include <algorithm>

#include "core/result.h"

namespace chorus {

ncclResult_t RegistrationTable::add(void* buff, size_t size, void** handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  regs_.push_back(std::make_unique<Registration>(Registration{buff, size}));
  *handle = regs_.back().get();
  return ncclSuccess;
}

ncclResult_t RegistrationTable::remove(void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(regs_.begin(), regs_.end(), [&](auto& r) { return r.get() == handle; });
  if (it == regs_.end())
    return fail(ncclInvalidArgument, "ncclCommDeregister: handle %p was not registered with this communicator", handle);
  regs_.erase(it);
  return ncclSuccess;
}

ncclResult_t RegistrationTable::addWindow(ncclComm* comm, void* buff, size_t size, int flags, ncclWindow_t* win) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(std::make_unique<ncclWindow_vidmem>(ncclWindow_vidmem{comm, buff, size, flags}));
  *win = windows_.back().get();
  return ncclSuccess;
}

ncclResult_t RegistrationTable::removeWindow(ncclWindow_t win) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [&](auto& w) { return w.get() == win; });
  if (it == windows_.end())
    return fail(ncclInvalidArgument, "ncclCommWindowDeregister: window %p is not registered with this communicator",
                static_cast<void*>(win));
  windows_.erase(it);
  return ncclSuccess;
}

}  // namespace chorus
