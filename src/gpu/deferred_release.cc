#include "gpu/deferred_release.h"

#include <algorithm>
#include <set>

namespace chorus::gpu {

std::vector<DeferredReleases::Release> DeferredReleases::takeHeld(int device) {
  std::vector<Release> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto mine = std::stable_partition(held_.begin(), held_.end(), [device](const auto& h) { return h.first != device; });
  for (auto it = mine; it != held_.end(); ++it) out.push_back(std::move(it->second));
  held_.erase(mine, held_.end());
  return out;
}

void DeferredReleases::hold(int device, Release release) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.emplace_back(device, std::move(release));
}

void DeferredReleases::releaseOrHold(int device, Release release, const BusyFn& busy) {
  if (busy(device)) return hold(device, std::move(release));
  for (Release& r : takeHeld(device)) r();
  release();
}

size_t DeferredReleases::runIdle(const BusyFn& busy) {
  std::set<int> devices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& h : held_) devices.insert(h.first);
  }
  size_t ran = 0;
  for (int device : devices) {
    if (busy(device)) continue;
    for (Release& r : takeHeld(device)) {
      r();
      ++ran;
    }
  }
  return ran;
}

size_t DeferredReleases::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

}  // namespace chorus::gpu
