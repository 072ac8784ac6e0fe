// Host vs GPU mode selection (chorusSetDefaultMode, CHORUS_MODE).
#pragma once

#include "chorus/chorus.h"

struct ncclComm;

namespace chorus {

// Process-wide default set through chorusSetDefaultMode; Auto means "use CHORUS_MODE".
void setDefaultMode(chorusMode_t mode);
// Decides the mode for a new communicator. Auto means GPU mode when this
// process can use a GPU (a CUDA build, a driver, a visible device), host mode
// otherwise; an explicit GPU request fails with ncclInvalidUsage, saying why,
// when it cannot be met.
ncclResult_t resolveMode(chorusMode_t* mode);

// Host or GPU mode for what is about to be created (a communicator's rank,
// ncclMemAlloc's memory), and in GPU mode the device it belongs to: a
// split/shrink child (parent != null) keeps its parent's; otherwise
// resolveMode decides and the device is the calling thread's current one.
// The one place that makes this decision; everything created afterwards
// reads it from the communicator (commIsHostMode).
struct ModeChoice {
  bool hostMode = true;
  int device = -1;  // GPU mode only
};
ncclResult_t chooseMode(const ncclComm* parent, ModeChoice* out);

}  // namespace chorus
