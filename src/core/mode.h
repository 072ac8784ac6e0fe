// Host vs GPU mode selection (chorusSetDefaultMode, CHORUS_MODE).
#pragma once

#include "chorus/chorus.h"

namespace chorus {

// Process-wide default set through chorusSetDefaultMode; Auto means "use CHORUS_MODE".
void setDefaultMode(chorusMode_t mode);
// Decides the mode for a new communicator. Auto means GPU mode when this
// process can use a GPU (a CUDA build, a driver, a visible device), host mode
// otherwise; an explicit GPU request fails with ncclInvalidUsage, saying why,
// when it cannot be met.
ncclResult_t resolveMode(chorusMode_t* mode);

}  // namespace chorus
