// The wire configuration of a reduction (chorusReduceConfig_t, docs/wire.md):
// validated and turned into the task's WireSpec, from the caller's config
// (chorusAllReduceEx, chorusReduceScatterEx) or the environment knobs
// (CHORUS_WIRE, CHORUS_DETERMINISTIC) for the plain calls.
#pragma once

#include "chorus/chorus.h"
#include "enqueue/task.h"

namespace chorus {

// `t` has its type, datatype and resolved reduction. `config`: the caller's
// (NULL: CHORUS_REDUCE_CONFIG_INIT) when `explicitConfig`, else the
// communicator's knobs apply.
ncclResult_t configureWire(Task* t, bool explicitConfig, const chorusReduceConfig_t* config, const char* fn);

}  // namespace chorus
