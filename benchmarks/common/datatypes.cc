#include "common/datatypes.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace chorus_bench {
namespace {

// maxExact for integers is kept below the type's bound so that the poison
// value (the bound itself) can never be a correct result.
const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, TypeClass::SignedInt, 7, 127},
    {ncclUint8, "uint8", 1, TypeClass::UnsignedInt, 8, 254},
    {ncclInt32, "int32", 4, TypeClass::SignedInt, 31, 1 << 20},
    {ncclUint32, "uint32", 4, TypeClass::UnsignedInt, 32, 1 << 20},
    {ncclInt64, "int64", 8, TypeClass::SignedInt, 63, 1 << 20},
    {ncclUint64, "uint64", 8, TypeClass::UnsignedInt, 64, 1 << 20},
    {ncclFloat16, "half", 2, TypeClass::Float, 10, 2048},
    {ncclFloat32, "float", 4, TypeClass::Float, 23, 1 << 24},
    {ncclFloat64, "double", 8, TypeClass::Float, 52, 1 << 30},
    {ncclBfloat16, "bfloat16", 2, TypeClass::Float, 7, 256},
    {ncclFloat8e4m3, "f8e4m3", 1, TypeClass::Float, 3, 16},
    {ncclFloat8e5m2, "f8e5m2", 1, TypeClass::Float, 2, 8},
};

struct Alias {
  const char* name;
  ncclDataType_t type;
};
const Alias kTypeAliases[] = {
    {"char", ncclInt8},       {"int", ncclInt32},           {"float16", ncclFloat16},     {"fp16", ncclFloat16},
    {"float32", ncclFloat32}, {"fp32", ncclFloat32},        {"float64", ncclFloat64},     {"fp64", ncclFloat64},
    {"bf16", ncclBfloat16},   {"fp8e4m3", ncclFloat8e4m3},  {"fp8e5m2", ncclFloat8e5m2},  {"e4m3", ncclFloat8e4m3},
    {"e5m2", ncclFloat8e5m2}, {"fp8_e4m3", ncclFloat8e4m3}, {"fp8_e5m2", ncclFloat8e5m2},
};

struct OpName {
  const char* name;
  BenchOp op;
};
const OpName kOps[] = {
    {"sum", BenchOp::Sum}, {"prod", BenchOp::Prod}, {"max", BenchOp::Max},
    {"min", BenchOp::Min}, {"avg", BenchOp::Avg},   {"premulsum", BenchOp::PreMulSum},
};

// Layout of a small binary floating-point format. `finite` marks the OCP
// e4m3 ("fn") flavour: no infinities, all-ones is NaN, the top exponent is
// an ordinary binade otherwise.
struct MiniFloat {
  int expBits;
  int mantBits;
  bool finite;
  int bias() const { return (1 << (expBits - 1)) - 1; }
  uint32_t expMask() const { return (1u << expBits) - 1; }
};

constexpr MiniFloat kHalf{5, 10, false};
constexpr MiniFloat kBf16{8, 7, false};
constexpr MiniFloat kE4m3{4, 3, true};
constexpr MiniFloat kE5m2{5, 2, false};

double decodeMini(const MiniFloat& f, uint32_t bits) {
  const uint32_t mant = bits & ((1u << f.mantBits) - 1);
  const uint32_t exp = (bits >> f.mantBits) & f.expMask();
  const bool neg = (bits >> (f.expBits + f.mantBits)) & 1;
  double mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<double>(mant), 1 - f.bias() - f.mantBits);
  } else if (!f.finite && exp == f.expMask()) {
    mag = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (f.finite && exp == f.expMask() && mant == (1u << f.mantBits) - 1) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else {
    mag = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.mantBits), static_cast<int>(exp) - f.bias());
  }
  return neg ? -mag : mag;
}

uint32_t nanBits(const MiniFloat& f) { return (1u << (f.expBits + f.mantBits + 1)) - 1; }

uint32_t encodeMini(const MiniFloat& f, double v) {
  if (std::isnan(v)) return nanBits(f);
  const uint32_t sign = std::signbit(v) ? 1u << (f.expBits + f.mantBits) : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  // Largest exponent field that holds finite values, and its largest mantissa.
  const uint32_t topExp = f.finite ? f.expMask() : f.expMask() - 1;
  const uint32_t topMant = f.finite ? (1u << f.mantBits) - 2 : (1u << f.mantBits) - 1;
  const uint32_t overflow = f.finite ? nanBits(f) & ~sign : f.expMask() << f.mantBits;
  int e2;
  std::frexp(a, &e2);
  int biased = e2 - 1 + f.bias();
  uint32_t bits;
  if (biased <= 0) {
    // Subnormal: count units of the smallest step; a carry into 2^mantBits
    // lands exactly on the smallest normal encoding.
    bits = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, f.bias() - 1 + f.mantBits)));
  } else {
    double frac = std::ldexp(a, -(e2 - 1)) - 1.0;
    auto m = static_cast<uint32_t>(std::nearbyint(std::ldexp(frac, f.mantBits)));
    if (m == (1u << f.mantBits)) {
      m = 0;
      ++biased;
    }
    if (static_cast<uint32_t>(biased) > topExp || (static_cast<uint32_t>(biased) == topExp && m > topMant))
      return sign | overflow;
    bits = (static_cast<uint32_t>(biased) << f.mantBits) | m;
  }
  return sign | bits;
}

template <class T>
void storeAs(double v, void* dst) {
  T t = static_cast<T>(v);
  std::memcpy(dst, &t, sizeof t);
}

template <class T>
double loadAs(const void* src) {
  T t;
  std::memcpy(&t, src, sizeof t);
  return static_cast<double>(t);
}

template <class Bits>
void storeBits(uint32_t bits, void* dst) {
  auto b = static_cast<Bits>(bits);
  std::memcpy(dst, &b, sizeof b);
}

template <class Bits>
uint32_t loadBits(const void* src) {
  Bits b;
  std::memcpy(&b, src, sizeof b);
  return b;
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];  // unreachable for the types the parser produces
}

bool parseTypes(const std::string& arg, std::vector<ncclDataType_t>* out) {
  out->clear();
  if (arg == "all") {
    for (const TypeInfo& t : kTypes) out->push_back(t.type);
    return true;
  }
  for (const TypeInfo& t : kTypes)
    if (arg == t.name) out->push_back(t.type);
  for (const Alias& a : kTypeAliases)
    if (arg == a.name) out->push_back(a.type);
  return !out->empty();
}

const char* opName(BenchOp op) {
  // The table column keeps nccl-tests' 6-character spelling, which scripts match on.
  if (op == BenchOp::PreMulSum) return "mulsum";
  for (const OpName& o : kOps)
    if (o.op == op) return o.name;
  return "none";
}

bool parseOps(const std::string& arg, std::vector<BenchOp>* out) {
  out->clear();
  if (arg == "all") {
    for (const OpName& o : kOps) out->push_back(o.op);
    return true;
  }
  for (const OpName& o : kOps)
    if (arg == o.name) out->push_back(o.op);
  if (arg == "mulsum") out->push_back(BenchOp::PreMulSum);  // nccl-tests' spelling
  return !out->empty();
}

ncclRedOp_t builtinOp(BenchOp op) {
  switch (op) {
    case BenchOp::Prod:
      return ncclProd;
    case BenchOp::Max:
      return ncclMax;
    case BenchOp::Min:
      return ncclMin;
    case BenchOp::Avg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

void encodeValue(ncclDataType_t type, double v, void* dst) {
  switch (type) {
    case ncclInt8:
      return storeAs<int8_t>(v, dst);
    case ncclUint8:
      return storeAs<uint8_t>(v, dst);
    case ncclInt32:
      return storeAs<int32_t>(v, dst);
    case ncclUint32:
      return storeAs<uint32_t>(v, dst);
    case ncclInt64:
      return storeAs<int64_t>(v, dst);
    case ncclUint64:
      return storeAs<uint64_t>(v, dst);
    case ncclFloat32:
      return storeAs<float>(v, dst);
    case ncclFloat64:
      return storeAs<double>(v, dst);
    case ncclFloat16:
      return storeBits<uint16_t>(encodeMini(kHalf, v), dst);
    case ncclBfloat16:
      return storeBits<uint16_t>(encodeMini(kBf16, v), dst);
    case ncclFloat8e4m3:
      return storeBits<uint8_t>(encodeMini(kE4m3, v), dst);
    case ncclFloat8e5m2:
      return storeBits<uint8_t>(encodeMini(kE5m2, v), dst);
    default:
      return;
  }
}

double decodeValue(ncclDataType_t type, const void* src) {
  switch (type) {
    case ncclInt8:
      return loadAs<int8_t>(src);
    case ncclUint8:
      return loadAs<uint8_t>(src);
    case ncclInt32:
      return loadAs<int32_t>(src);
    case ncclUint32:
      return loadAs<uint32_t>(src);
    case ncclInt64:
      return loadAs<int64_t>(src);
    case ncclUint64:
      return loadAs<uint64_t>(src);
    case ncclFloat32:
      return loadAs<float>(src);
    case ncclFloat64:
      return loadAs<double>(src);
    case ncclFloat16:
      return decodeMini(kHalf, loadBits<uint16_t>(src));
    case ncclBfloat16:
      return decodeMini(kBf16, loadBits<uint16_t>(src));
    case ncclFloat8e4m3:
      return decodeMini(kE4m3, loadBits<uint8_t>(src));
    case ncclFloat8e5m2:
      return decodeMini(kE5m2, loadBits<uint8_t>(src));
    default:
      return 0;
  }
}

void poisonValue(ncclDataType_t type, void* dst) {
  const TypeInfo& t = typeInfo(type);
  switch (t.cls) {
    case TypeClass::Float:
      std::memset(dst, 0xff, t.size);
      return;  // NaN in every float format
    case TypeClass::UnsignedInt:
      std::memset(dst, 0xff, t.size);
      return;
    case TypeClass::SignedInt:
      std::memset(dst, 0, t.size);
      static_cast<unsigned char*>(dst)[t.size - 1] = 0x80;  // little-endian minimum
      return;
  }
}

}  // namespace chorus_bench
