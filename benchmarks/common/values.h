// The input values of the results check and the results they must produce.
//
// Every input is a small integer chosen so that every partial result of the
// reduction is an integer the element type represents exactly; the final
// result is then the same whatever order the library reduces in, and the
// check can demand bit-exact answers for sum, prod, max, min and premulsum on
// every type, fp8 included:
//  - sum / max / min / premulsum: values in [-K, K] ([0, K] for unsigned
//    types) with nranks * K * scalar <= the type's exact-integer range. When
//    that leaves K < 1 (fp8 with many ranks), only one rank in nranks
//    contributes a 1 to each element and the others contribute 0.
//  - prod: magnitudes 1, and 2 on exactly one rank per element; signed and
//    floating types also flip signs, so the product is +-2.
//  - avg: integer types use non-negative inputs and expect floor(sum/n);
//    floating types expect sum/n within a tolerance, because libraries may
//    pre-multiply by 1/n (inexact for n not a power of two).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/datatypes.h"

namespace chorus_bench {

class ValueScheme {
 public:
  ValueScheme(ncclDataType_t type, BenchOp op, int nranks);

  // The value rank `rank` holds at index `idx` of its input buffer.
  int64_t input(int rank, size_t idx) const;
  // The reduction over all ranks of input(r, idx).
  double reduced(size_t idx) const;
  // Largest |got - expected| accepted (0 except for floating-point avg).
  double tolerance(double expected) const;
  // Accepts |got - expected| up to `absError` as well (compressed wire formats).
  void allowError(double absError) { extraTol_ = absError; }
  // Bound on |input(r, i)| over ranks and indices.
  double maxAbsInput() const { return oneHot_ || op_ == BenchOp::Prod ? 2.0 : static_cast<double>(k_); }

  // input(r, i) and reduced(i) repeat with this period in i (at most a few
  // hundred), so filling and checking can tabulate one period.
  size_t period() const;

  ncclDataType_t type() const { return type_; }
  // Bound on |input|: fill code may tabulate encodings of [-bound, bound].
  static constexpr int64_t kMaxInput = 64;

 private:
  ncclDataType_t type_;
  BenchOp op_;
  int nranks_;
  int64_t k_;      // inputs lie in [-k_, k_] (or [0, k_])
  bool signed_;    // negative inputs allowed
  bool oneHot_;    // k_ < 1: one contributing rank per element
  double tolEps_;  // relative precision of the type (floating avg only)
  double extraTol_ = 0;
};

}  // namespace chorus_bench
