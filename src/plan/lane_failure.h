// The one mapping from a lane failure record (kernels/common/step_rules.h)
// to an error code and message, used by the host executor and by the GPU
// executor when it reads the record its kernels wrote.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/step_rules.h"
#include "nccl.h"

namespace chorus {

// Writes the message for `f` (as seen by rank `rank`; `timeoutMs` is the
// limit that expired for TimedOut) into msg and returns the error code.
ncclResult_t describeLaneFailure(const step::LaneFailure& f, int rank, int64_t timeoutMs, char* msg, size_t n);

// describeLaneFailure, recorded as this thread's error (fail()).
ncclResult_t laneFailureError(const step::LaneFailure& f, int rank, int64_t timeoutMs);

}  // namespace chorus
