// Host vs GPU mode selection (chorusSetDefaultMode, CHORUS_MODE).
#pragma once

#include "chorus/chorus.h"

namespace chorus {

// Process-wide default set through chorusSetDefaultMode; Auto means "use CHORUS_MODE".
void setDefaultMode(chorusMode_t mode);
// Decides the mode for a new communicator; fails with ncclInvalidUsage when
// GPU mode is requested but this build has no GPU executor.
ncclResult_t resolveMode(chorusMode_t* mode);

}  // namespace chorus
