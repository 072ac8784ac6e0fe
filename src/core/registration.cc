#include "core/registration.h"

#include <algorithm>
#include <cstdint>

#include "core/result.h"

namespace chorus {

ncclResult_t RegistrationTable::add(void* buff, size_t size, void** handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  regs_.push_back(std::make_unique<Registration>(Registration{buff, size}));
  *handle = regs_.back().get();
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return ncclSuccess;
}

ncclResult_t RegistrationTable::remove(void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(regs_.begin(), regs_.end(), [&](auto& r) { return r.get() == handle; });
  if (it == regs_.end())
    return fail(ncclInvalidArgument, "ncclCommDeregister: handle %p was not registered with this communicator", handle);
  regs_.erase(it);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return ncclSuccess;
}

ncclResult_t RegistrationTable::addWindow(ncclComm* comm, void* buff, size_t size, int flags, ncclWindow_t* win) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(std::make_unique<ncclWindow_vidmem>(ncclWindow_vidmem{comm, buff, size, flags}));
  *win = windows_.back().get();
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return ncclSuccess;
}

ncclResult_t RegistrationTable::removeWindow(ncclWindow_t win) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [&](auto& w) { return w.get() == win; });
  if (it == windows_.end())
    return fail(ncclInvalidArgument, "ncclCommWindowDeregister: window %p is not registered with this communicator",
                static_cast<void*>(win));
  windows_.erase(it);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return ncclSuccess;
}

namespace {

bool inside(const void* base, size_t size, const void* p, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(base), q = reinterpret_cast<uintptr_t>(p);
  return q >= b && bytes <= size && q - b <= size - bytes;
}

}  // namespace

bool RegistrationTable::covers(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& r : regs_)
    if (inside(r->base, r->size, p, bytes)) return true;
  for (const auto& w : windows_)
    if (inside(w->base, w->size, p, bytes)) return true;
  return false;
}

}  // namespace chorus
