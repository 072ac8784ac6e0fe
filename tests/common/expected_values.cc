#include "common/expected_values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace chorus::test {
namespace {

const TypeInfo kTypes[] = {
    {ncclInt8, "int8", 1, false, true, 127},
    {ncclUint8, "uint8", 1, false, false, 255},
    {ncclInt32, "int32", 4, false, true, 2147483647.0},
    {ncclUint32, "uint32", 4, false, false, 4294967295.0},
    {ncclInt64, "int64", 8, false, true, 9007199254740992.0},
    {ncclUint64, "uint64", 8, false, false, 9007199254740992.0},
    {ncclFloat16, "half", 2, true, true, 2048},
    {ncclFloat32, "float", 4, true, true, 16777216.0},
    {ncclFloat64, "double", 8, true, true, 9007199254740992.0},
    {ncclBfloat16, "bf16", 2, true, true, 256},
    {ncclFloat8e4m3, "fp8e4m3", 1, true, true, 16},
    {ncclFloat8e5m2, "fp8e5m2", 1, true, true, 8},
};

// Layout of the small float formats: exponent and mantissa widths.
struct FloatFormat {
  int expBits;
  int manBits;
};

bool smallFloat(ncclDataType_t t, FloatFormat* f) {
  switch (t) {
    case ncclFloat16: *f = {5, 10}; return true;
    case ncclBfloat16: *f = {8, 7}; return true;
    case ncclFloat8e4m3: *f = {4, 3}; return true;
    case ncclFloat8e5m2: *f = {5, 2}; return true;
    default: return false;
  }
}

// Round-to-nearest-even encoding of a finite value that fits the format's
// range (test values are small; overflow is not needed here).
uint64_t encodeSmallFloat(const FloatFormat& f, double v) {
  const uint64_t sign = std::signbit(v) ? (1ull << (f.expBits + f.manBits)) : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  const int bias = (1 << (f.expBits - 1)) - 1;
  int e2 = 0;
  std::frexp(a, &e2);
  int exp = std::max(e2 - 1, 1 - bias);  // subnormals share the minimum exponent
  double q = std::nearbyint(std::ldexp(a, f.manBits - exp));  // default mode: ties to even
  const double implicitOne = std::ldexp(1.0, f.manBits);
  if (q >= 2 * implicitOne) {  // rounding carried into the next binade
    q /= 2;
    ++exp;
  }
  const uint64_t mant = static_cast<uint64_t>(q);
  const uint64_t biased = q >= implicitOne ? static_cast<uint64_t>(exp + bias) : 0;
  return sign | (biased << f.manBits) | (mant & ((1ull << f.manBits) - 1));
}

double decodeSmallFloat(const FloatFormat& f, uint64_t bits) {
  const bool neg = (bits >> (f.expBits + f.manBits)) & 1;
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint64_t e = (bits >> f.manBits) & ((1ull << f.expBits) - 1);
  const uint64_t m = bits & ((1ull << f.manBits) - 1);
  const double mag = e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - f.manBits)
                            : std::ldexp(static_cast<double>((1ull << f.manBits) + m),
                                         static_cast<int>(e) - bias - f.manBits);
  return neg ? -mag : mag;
}

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hashOf(int rank, size_t index, uint64_t salt) {
  return mix(salt ^ (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(index));
}

uint64_t sizeMask(size_t size) { return size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1); }

// Largest per-rank magnitude so that n ranks' values (times `scale`) stay exact.
int magnitudeFor(const TypeInfo& ti, int nranks, int scale) {
  const double m = std::floor(ti.exactLimit / (static_cast<double>(nranks) * scale));
  return static_cast<int>(std::clamp(m, 1.0, 3.0));
}

// A value in [-m, m] (signed / float types) or [0, m] (unsigned).
double smallValue(const TypeInfo& ti, int m, int rank, size_t index, uint64_t salt) {
  const uint64_t h = hashOf(rank, index, salt);
  const bool neg = ti.isSigned || ti.isFloat;
  if (neg) return static_cast<double>(static_cast<int>(h % static_cast<uint64_t>(2 * m + 1)) - m);
  return static_cast<double>(h % static_cast<uint64_t>(m + 1));
}

// The exact (unrounded) combination of every rank's input at `index`.
double exactCombine(ncclDataType_t t, OpKind op, int nranks, size_t index) {
  double acc = 0;
  for (int r = 0; r < nranks; ++r) {
    const double x = reduceInput(t, op, nranks, r, index);
    switch (op) {
      case OpKind::Sum:
      case OpKind::Avg: acc += x; break;
      case OpKind::PreMulImmediate:
      case OpKind::PreMulDevice: acc += preMulScalar(t, r) * x; break;
      case OpKind::Prod: acc = r == 0 ? x : acc * x; break;
      case OpKind::Max: acc = r == 0 ? x : std::max(acc, x); break;
      case OpKind::Min: acc = r == 0 ? x : std::min(acc, x); break;
    }
  }
  return acc;
}

}  // namespace

const TypeInfo& typeInfo(ncclDataType_t t) {
  for (const TypeInfo& ti : kTypes)
    if (ti.type == t) return ti;
  return kTypes[0];
}

const std::vector<ncclDataType_t>& allTypes() {
  static const std::vector<ncclDataType_t> types = [] {
    std::vector<ncclDataType_t> v;
    for (const TypeInfo& ti : kTypes) v.push_back(ti.type);
    return v;
  }();
  return types;
}

uint64_t encodeValue(ncclDataType_t t, double v) {
  FloatFormat f;
  if (smallFloat(t, &f)) return encodeSmallFloat(f, v);
  if (t == ncclFloat32) {
    const float x = static_cast<float>(v);
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  }
  if (t == ncclFloat64) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  const TypeInfo& ti = typeInfo(t);
  const int64_t iv = static_cast<int64_t>(v);
  return static_cast<uint64_t>(iv) & sizeMask(ti.size);
}

double decodeValue(ncclDataType_t t, uint64_t bits) {
  FloatFormat f;
  if (smallFloat(t, &f)) return decodeSmallFloat(f, bits);
  if (t == ncclFloat32) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, 4);
    return x;
  }
  if (t == ncclFloat64) {
    double x;
    std::memcpy(&x, &bits, 8);
    return x;
  }
  const TypeInfo& ti = typeInfo(t);
  const uint64_t masked = bits & sizeMask(ti.size);
  if (!ti.isSigned) return static_cast<double>(masked);
  const unsigned shift = static_cast<unsigned>(64 - 8 * ti.size);
  return static_cast<double>(static_cast<int64_t>(masked << shift) >> shift);
}

bool representable(ncclDataType_t t, double v) { return decodeValue(t, encodeValue(t, v)) == v; }

uint64_t loadElem(const void* base, size_t index, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + index * size, size);
  return v;
}

void storeElem(void* base, size_t index, size_t size, uint64_t bits) {
  std::memcpy(static_cast<uint8_t*>(base) + index * size, &bits, size);
}

const std::vector<OpKind>& allOps() {
  static const std::vector<OpKind> ops = {OpKind::Sum, OpKind::Prod, OpKind::Max, OpKind::Min,
                                          OpKind::Avg, OpKind::PreMulImmediate, OpKind::PreMulDevice};
  return ops;
}

const char* opName(OpKind k) {
  switch (k) {
    case OpKind::Sum: return "sum";
    case OpKind::Prod: return "prod";
    case OpKind::Max: return "max";
    case OpKind::Min: return "min";
    case OpKind::Avg: return "avg";
    case OpKind::PreMulImmediate: return "premulsum(host)";
    case OpKind::PreMulDevice: return "premulsum(device)";
  }
  return "?";
}

double preMulScalar(ncclDataType_t t, int rank) {
  // e5m2 only keeps odd integers up to 7; a uniform 2 keeps every partial sum even.
  if (t == ncclFloat8e5m2) return 2;
  return 1 + (rank % 2);
}

double reduceInput(ncclDataType_t t, OpKind op, int nranks, int rank, size_t index) {
  const TypeInfo& ti = typeInfo(t);
  index %= kInputPeriod;
  switch (op) {
    case OpKind::Avg:
      // Floating-point averages are taken as NCCL takes them: each value
      // times 1/nranks rounded to the type, then summed. Those products are
      // rarely exact, so each element has one contributing rank (the others
      // give 0): then the result does not depend on the order of the sums.
      if (ti.isFloat && static_cast<int>(index % static_cast<size_t>(nranks)) != rank) return 0;
      return smallValue(ti, magnitudeFor(ti, nranks, 1), rank, index, 0x51);
    case OpKind::Sum: return smallValue(ti, magnitudeFor(ti, nranks, 1), rank, index, 0x51);
    case OpKind::PreMulImmediate:
    case OpKind::PreMulDevice: return smallValue(ti, magnitudeFor(ti, nranks, 2), rank, index, 0x52);
    case OpKind::Prod: {
      // At most ceil(n/4) factors of 2 per element: |product| <= 4 for n <= 8.
      const double mag = (static_cast<size_t>(rank) + 2 * index) % 4 == 0 ? 2 : 1;
      const bool neg = (ti.isSigned || ti.isFloat) && (hashOf(rank, index, 0x53) & 1);
      return neg ? -mag : mag;
    }
    case OpKind::Max:
    case OpKind::Min: {
      const uint64_t h = hashOf(rank, index, 0x54) % 9;
      return (ti.isSigned || ti.isFloat) ? static_cast<double>(h) - 4 : static_cast<double>(h);
    }
  }
  return 0;
}

uint64_t reduceExpectedBits(ncclDataType_t t, OpKind op, int nranks, size_t index) {
  const double exact = exactCombine(t, op, nranks, index);
  if (op != OpKind::Avg) return encodeValue(t, exact);
  const TypeInfo& ti = typeInfo(t);
  if (ti.isFloat) {
    // The one contribution times 1/nranks as the type holds it (rounded from
    // float, as NCCL rounds it; double keeps 1.0 / nranks), rounded once.
    const double scalar = t == ncclFloat64 ? 1.0 / nranks
                                           : decodeValue(t, encodeValue(t, static_cast<float>(1.0 / nranks)));
    return encodeValue(t, exact * scalar);
  }
  // Integer average: the exact sum divided with C's truncation toward zero.
  return encodeValue(t, static_cast<double>(static_cast<int64_t>(exact) / nranks));
}

ReduceTables::ReduceTables(ncclDataType_t t, OpKind op, int nranks, size_t span)
    : period_(std::clamp<size_t>(span, 1, kInputPeriod)),
      inputs_(static_cast<size_t>(nranks) * period_),
      expected_(period_) {
  // With span < kInputPeriod, index % period_ == index for every index used.
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < period_; ++i)
      inputs_[static_cast<size_t>(r) * period_ + i] = encodeValue(t, reduceInput(t, op, nranks, r, i));
  for (size_t i = 0; i < period_; ++i) expected_[i] = reduceExpectedBits(t, op, nranks, i);
}

uint64_t payloadBits(ncclDataType_t t, int rank, size_t index) {
  const TypeInfo& ti = typeInfo(t);
  uint64_t bits = hashOf(rank, index, 0x55) & sizeMask(ti.size);
  // Clearing the top exponent bit keeps every float format finite (no NaN/Inf).
  if (ti.isFloat) bits &= ~(1ull << (8 * ti.size - 2));
  return bits;
}

std::string bitsToString(ncclDataType_t t, uint64_t bits) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "0x%llx (%g)", static_cast<unsigned long long>(bits), decodeValue(t, bits));
  return buf;
}

GuardedBuffer::GuardedBuffer(size_t bytes, size_t misalign)
    : storage_(bytes + 2 * kGuard + misalign, kGuardByte), bytes_(bytes), misalign_(misalign) {}

void GuardedBuffer::fill(uint8_t byte) { std::memset(data(), byte, bytes_); }

std::string GuardedBuffer::guardDamage() const {
  const size_t front = kGuard + misalign_;
  for (size_t i = 0; i < front; ++i)
    if (storage_[i] != kGuardByte) return "guard byte " + std::to_string(front - i) + " before the buffer was written";
  for (size_t i = front + bytes_; i < storage_.size(); ++i)
    if (storage_[i] != kGuardByte)
      return "guard byte " + std::to_string(i - front - bytes_) + " after the buffer was written";
  return "";
}

}  // namespace chorus::test
