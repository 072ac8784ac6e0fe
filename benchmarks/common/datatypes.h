// Element types and reduction operators as the benchmarks see them: names
// for the command line and the table, element sizes, and a codec between the
// stored representation of each type and double.
//
// The codec only needs to be exact for the small integers the results check
// uses (and for the poison value), but encode() rounds to nearest-even for
// any input so that it is never surprising.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace chorus_bench {

enum class TypeClass { SignedInt, UnsignedInt, Float };

struct TypeInfo {
  ncclDataType_t type;
  const char* name;  // as printed in the "type" column
  size_t size;       // bytes per element
  TypeClass cls;
  int mantissaBits;  // explicit fraction bits (floats); value bits (ints)
  // Every integer in [-maxExact, maxExact] (or [0, maxExact] when unsigned)
  // is representable, so sums that stay inside it are exact in any order.
  double maxExact;
};

const TypeInfo& typeInfo(ncclDataType_t type);

// Parses a -d argument: one name (or alias) or "all". False on an unknown name.
bool parseTypes(const std::string& arg, std::vector<ncclDataType_t>* out);

// The reductions the tools can run. PreMulSum is ncclRedOpCreatePreMulSum
// with a scalar of 2; None is used by collectives that do not reduce.
enum class BenchOp { Sum, Prod, Max, Min, Avg, PreMulSum, None };

// Name in the redop column ("mulsum" for PreMulSum, as nccl-tests prints it).
const char* opName(BenchOp op);
// Parses a -o argument: one name or "all". False on an unknown name.
bool parseOps(const std::string& arg, std::vector<BenchOp>* out);
// The built-in operator for op (PreMulSum and None have none: ncclSum).
ncclRedOp_t builtinOp(BenchOp op);

// The scalar PreMulSum multiplies by; the checker relies on it being 2.
constexpr double kPreMulScalar = 2.0;

// Stores v as one element of `type` at dst (rounding to nearest-even).
void encodeValue(ncclDataType_t type, double v, void* dst);
// Reads one element of `type` at src.
double decodeValue(ncclDataType_t type, const void* src);

// A value no correct result of the check can produce: NaN for floating
// types, the most negative value for signed and the largest for unsigned
// integers (the check keeps results strictly inside those bounds).
void poisonValue(ncclDataType_t type, void* dst);

}  // namespace chorus_bench
