#include "common/values.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace chorus_bench {

ValueScheme::ValueScheme(ncclDataType_t type, BenchOp op, int nranks)
    : type_(type), op_(op), nranks_(std::max(nranks, 1)) {
  const TypeInfo& t = typeInfo(type);
  const double scale = op == BenchOp::PreMulSum ? kPreMulScalar : 1.0;
  const double k = std::floor(t.maxExact / (nranks_ * scale));
  k_ = static_cast<int64_t>(std::min<double>(k, kMaxInput));
  oneHot_ = k_ < 1;
  // Integer avg truncates; non-negative inputs make that the same as floor.
  signed_ = t.cls == TypeClass::Float || (t.cls == TypeClass::SignedInt && op != BenchOp::Avg);
  tolEps_ = std::ldexp(1.0, -t.mantissaBits);
}

int64_t ValueScheme::input(int rank, size_t idx) const {
  // Mixing rank and index with small co-prime strides spreads the values
  // over the range without any structure a broken algorithm could mimic.
  const uint64_t mix = static_cast<uint64_t>(rank) * 13u + idx * 7u;
  if (op_ == BenchOp::Prod) {
    const int64_t mag = (static_cast<uint64_t>(rank) + idx) % nranks_ == 0 ? 2 : 1;
    const bool neg = signed_ && (static_cast<uint64_t>(rank) * 5u + idx * 3u) % 7u == 0;
    return neg ? -mag : mag;
  }
  if (oneHot_) return (static_cast<uint64_t>(rank) + idx) % nranks_ == 0 ? 1 : 0;
  if (signed_) return static_cast<int64_t>(mix % static_cast<uint64_t>(2 * k_ + 1)) - k_;
  return static_cast<int64_t>(mix % static_cast<uint64_t>(k_ + 1));
}

size_t ValueScheme::period() const {
  // The moduli input() applies to the index: the value range, the rank count
  // (prod's doubled rank, one-hot's contributor) and prod's sign stride 7.
  const auto n = static_cast<size_t>(nranks_);
  if (op_ == BenchOp::Prod) return std::lcm(n, size_t{7});
  if (oneHot_) return n;
  return static_cast<size_t>(signed_ ? 2 * k_ + 1 : k_ + 1);
}

double ValueScheme::reduced(size_t idx) const {
  int64_t acc = input(0, idx);
  for (int r = 1; r < nranks_; ++r) {
    const int64_t v = input(r, idx);
    switch (op_) {
      case BenchOp::Prod:
        acc *= v;
        break;
      case BenchOp::Max:
        acc = std::max(acc, v);
        break;
      case BenchOp::Min:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op_ == BenchOp::PreMulSum) return static_cast<double>(acc) * kPreMulScalar;
  if (op_ == BenchOp::Avg) {
    if (typeInfo(type_).cls == TypeClass::Float) return static_cast<double>(acc) / nranks_;
    return static_cast<double>(acc / nranks_);  // acc >= 0: truncation == floor
  }
  return static_cast<double>(acc);
}

double ValueScheme::tolerance(double expected) const {
  if (op_ != BenchOp::Avg || typeInfo(type_).cls != TypeClass::Float) return extraTol_;
  // Each of the n pre-scaled inputs and every partial sum may round once.
  const double magnitude = std::fabs(expected) + static_cast<double>(std::max<int64_t>(k_, 1));
  return (nranks_ + 1) * tolEps_ * magnitude + extraTol_;
}

}  // namespace chorus_bench
