#include "gpu/launch_policy.h"

#include <algorithm>

namespace chorus::gpu {

int lanesPerLaunch(int sms, int ranksOnDevice, int launchMax) {
  return std::clamp(sms / std::max(ranksOnDevice, 1), 1, std::max(launchMax, 1));
}

void fitChannels(int maxLanes, int defaultChannels, CommConfig* config) {
  const int fit = std::max(1, maxLanes / 2);  // a tree channel has two lanes
  if (!config->maxChannelsChosen) config->maxChannels = std::min(defaultChannels, fit);
  config->maxChannels = std::max(1, std::min(config->maxChannels, maxLanes));
  config->minChannels = std::min(config->minChannels, config->maxChannels);
}

namespace {

// Why streams x and y of two ranks would serialize their kernels; null if not.
const char* serializes(const StreamUse::Stream& x, const StreamUse::Stream& y) {
  if (x.id == y.id || (x.legacy && y.legacy)) return "on the same CUDA stream";
  if ((x.legacy && y.blocking) || (y.legacy && x.blocking))
    return "on the legacy default stream and a blocking stream";
  return nullptr;
}

}  // namespace

std::string findSerializedRanks(const std::vector<StreamUse>& launches) {
  for (size_t i = 0; i < launches.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const StreamUse& a = launches[j];
      const StreamUse& b = launches[i];
      if (a.device != b.device) continue;
      for (const StreamUse::Stream& x : a.streams) {
        for (const StreamUse::Stream& y : b.streams) {
          const char* why = serializes(x, y);
          if (why == nullptr) continue;
          return "ranks " + std::to_string(a.rank) + " and " + std::to_string(b.rank) + " of GPU " +
                 std::to_string(a.device) + " are launched " + why +
                 ": their kernels would run one after the other and wait for each other forever; give each rank "
                 "its own non-blocking stream (cudaStreamCreateWithFlags(..., cudaStreamNonBlocking))";
        }
      }
    }
  }
  return "";
}

}  // namespace chorus::gpu
