// Expected results of deterministic mode (docs/wire.md), computed here from
// the definition: rank r's input element i, the rank-order combination in
// the accumulation type (fp32 for narrow floats and float, fp64 for double,
// wrapping integers), PreMulSum's scalar applied to each input first, avg's
// division once, one final rounding. Inputs are deliberately inexact
// (thirds, mixed magnitudes), so any other order or any intermediate rounding
// gives different bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/common/float_types.h"
#include "nccl.h"

namespace chorus::test {

enum class DetOp { Sum, Prod, Max, Min, Avg, PreMul };
inline const DetOp kDetOps[] = {DetOp::Sum, DetOp::Prod, DetOp::Max, DetOp::Min, DetOp::Avg, DetOp::PreMul};
const char* detOpName(DetOp op);
const std::vector<ncclDataType_t>& detTypes();
size_t detTypeSize(ncclDataType_t t);

// Element bits of rank r's input i, and of rank r's PreMulSum scalar.
uint64_t detInput(ncclDataType_t t, DetOp op, int rank, size_t i);
uint64_t detScalar(ncclDataType_t t, int rank);
// The expected result element i of reducing ranks 0..n-1.
uint64_t detExpected(ncclDataType_t t, DetOp op, int nranks, size_t i);

inline uint64_t loadBits(const void* p, size_t i, size_t esz) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char*>(p) + i * esz, esz);
  return v;
}
inline void storeBits(void* p, size_t i, size_t esz, uint64_t v) {
  std::memcpy(static_cast<char*>(p) + i * esz, &v, esz);
}

}  // namespace chorus::test
