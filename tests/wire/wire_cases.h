// One deterministic-mode call as a test case: inputs from wire_expected.h,
// the call, and a bit-exact check of every output element.
#pragma once

#include <cstddef>

#include "common/rank_runner.h"
#include "wire/wire_expected.h"

namespace chorus::test {

// The plain calls get deterministic mode from CHORUS_DETERMINISTIC=1 (the
// runner's environment), the Ex calls from their config.
enum class DetCall { AllReduceEx, AllReduce, ReduceScatterEx, ReduceScatter, Reduce };
const char* detCallName(DetCall c);

struct DetCase {
  DetCall call = DetCall::AllReduceEx;
  ncclDataType_t type = ncclFloat32;
  DetOp op = DetOp::Sum;
  size_t count = 0;  // per rank output elements (ReduceScatter: recvcount)
  bool inPlace = false;
  int root = -1;  // Reduce: the root (-1: the last rank)
};

// Runs the case on this rank; failures are recorded in ctx. False on failure.
bool runDetCase(RankCtx& ctx, ncclComm_t comm, const DetCase& c);

}  // namespace chorus::test
