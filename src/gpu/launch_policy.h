// Decisions of the GPU executor that need no GPU, kept apart from the CUDA
// code so they are unit-tested everywhere: how many thread blocks a launch
// may use when several ranks share a GPU, the channel defaults that follow,
// and which stream layouts would make co-resident ranks wait for each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/comm_config.h"

namespace chorus::gpu {

// Every rank's lane kernel must be resident at once (lanes spin waiting for
// each other). One lane block (512 threads, 12 KiB of shared memory) always
// fits on an SM, so `ranksOnDevice` ranks may use sms / ranksOnDevice blocks
// each (at least 1, at most `launchMax`).
int lanesPerLaunch(int sms, int ranksOnDevice, int launchMax);

// GPU-mode channel bounds: the default (when the user chose none) is
// `defaultChannels`, lowered so a tree channel's two lanes fit; any choice is
// capped at the lanes a launch may use.
void fitChannels(int maxLanes, int defaultChannels, CommConfig* config);

// One rank's launch as the stream check sees it.
struct StreamUse {
  int rank = -1;
  int device = -1;
  struct Stream {
    uintptr_t id = 0;  // the handle's value
    bool legacy = false;    // the legacy default stream (NULL or cudaStreamLegacy)
    bool blocking = false;  // synchronizes with the legacy stream (not created non-blocking)
  };
  std::vector<Stream> streams;
};

// The first pair of ranks of one GPU, launched together by one thread, whose
// kernels would run one after the other (same stream, or legacy + blocking
// stream); empty when there is none. Names the ranks and the reason.
std::string findSerializedRanks(const std::vector<StreamUse>& launches);

}  // namespace chorus::gpu
