// Filling buffers and counting wrong elements for the results check (-c).
// All functions work on host-visible memory (see Memory::beginView).
#pragma once

#include <cstddef>
#include <vector>

#include "common/coll.h"
#include "common/values.h"

namespace chorus_bench {

// dst[i] = scheme.input(rank, i) for i in [0, count).
void fillInput(const ValueScheme& scheme, int rank, void* dst, size_t count);

// Fills count elements with the type's poison value.
void fillPoison(ncclDataType_t type, void* dst, size_t count);

// Elements of `recv` that differ from what the segments expect.
size_t countWrong(const ValueScheme& scheme, const void* recv, const std::vector<Segment>& segments);

}  // namespace chorus_bench
