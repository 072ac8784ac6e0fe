// How far a compressed all-reduce or reduce-scatter may be from the exact
// result (the -c check with --wire), from the error bounds of docs/wire.md.
#pragma once

#include "chorus/chorus.h"
#include "nccl.h"

namespace chorus_bench {

// Largest |got - exact| of one element of the sum (`average`: the mean) of
// `nranks` inputs of `type`, each at most `maxAbsInput` in magnitude, sent
// over `wire`; 0 for chorusWireNative (the check stays exact).
double wireErrorBound(chorusWire_t wire, ncclDataType_t type, int nranks, double maxAbsInput, bool average);

}  // namespace chorus_bench
