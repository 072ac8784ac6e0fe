// Inputs whose reduction has one exact answer whatever order the library adds
// them in, and the encodings to compare results bit for bit.
//
// Every input and every partial result is a small integer (or, for premulsum
// and avg, a small multiple / quotient of one) that each datatype represents
// exactly: fp8 e5m2 holds the integers up to 8 (and even ones up to 16), e4m3
// up to 16, bf16 up to 256, half up to 2048. So sums, products, min and max
// come out identical for any association order, and the test can demand
// bit-exact equality instead of a tolerance. The float encoders here are
// written independently of kernels/common/float_types.h, so the library's
// conversions are checked rather than reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace chorus::test {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
  double exactLimit;  // every integer of magnitude <= this is exact
};

const TypeInfo& typeInfo(ncclDataType_t t);
const std::vector<ncclDataType_t>& allTypes();

// Element bits (little-endian in the low bytes) of `v` in type t. Floats round
// to nearest even; integers truncate toward zero then wrap.
uint64_t encodeValue(ncclDataType_t t, double v);
double decodeValue(ncclDataType_t t, uint64_t bits);
bool representable(ncclDataType_t t, double v);

uint64_t loadElem(const void* base, size_t index, size_t size);
void storeElem(void* base, size_t index, size_t size, uint64_t bits);

// The reduction flavours the matrix covers.
enum class OpKind { Sum, Prod, Max, Min, Avg, PreMulImmediate, PreMulDevice };
const std::vector<OpKind>& allOps();
const char* opName(OpKind k);

// Rank r's pre-multiplier for premulsum cases.
double preMulScalar(ncclDataType_t t, int rank);
// Input element `index` of rank `rank` for a reduction.
double reduceInput(ncclDataType_t t, OpKind op, int nranks, int rank, size_t index);
// The exact result element `index` of reducing every rank's reduceInput.
uint64_t reduceExpectedBits(ncclDataType_t t, OpKind op, int nranks, size_t index);

// Inputs repeat with this (prime) period in the index, so a case can tabulate
// inputs and expected results once instead of per element; a prime keeps
// chunk and slot boundaries from lining up with it.
inline constexpr size_t kInputPeriod = 4099;

// reduceInput / reduceExpectedBits, encoded and tabulated over one period.
class ReduceTables {
 public:
  // Covers indices [0, span); beyond one period the tables repeat.
  ReduceTables(ncclDataType_t t, OpKind op, int nranks, size_t span);
  uint64_t input(int rank, size_t index) const { return inputs_[static_cast<size_t>(rank) * period_ + index % period_]; }
  uint64_t expected(size_t index) const { return expected_[index % period_]; }

 private:
  size_t period_;
  std::vector<uint64_t> inputs_;
  std::vector<uint64_t> expected_;
};

// A distinctive bit pattern for data-movement collectives: depends on
// (rank, index); float types never get NaN/Inf codes.
uint64_t payloadBits(ncclDataType_t t, int rank, size_t index);

std::string bitsToString(ncclDataType_t t, uint64_t bits);

// A heap buffer with guard zones before and after the data, filled with a
// pattern that must survive every call (nothing written outside the result).
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kGuardByte = 0x5a;
  static constexpr uint8_t kPoisonByte = 0xa5;

  explicit GuardedBuffer(size_t bytes, size_t misalign = 0);
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  void* data() { return storage_.data() + kGuard + misalign_; }
  const void* data() const { return storage_.data() + kGuard + misalign_; }
  size_t bytes() const { return bytes_; }
  void poison() { fill(kPoisonByte); }
  void fill(uint8_t byte);
  // Empty when both guard zones are intact; otherwise where they were hit.
  std::string guardDamage() const;

 private:
  std::vector<uint8_t> storage_;
  size_t bytes_;
  size_t misalign_;
};

}  // namespace chorus::test
