#include "common/check.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace chorus_bench {
namespace {

// Inputs are integers in [-kMaxInput, kMaxInput]; their encodings are
// tabulated once per call so that filling hundreds of MiB of half or fp8
// costs a table lookup per element, not a float conversion.
constexpr int64_t kSpan = ValueScheme::kMaxInput;

template <size_t N>
struct Encoded {
  std::array<std::array<unsigned char, N>, 2 * kSpan + 1> table;
  explicit Encoded(ncclDataType_t type) {
    for (int64_t v = -kSpan; v <= kSpan; ++v) encodeValue(type, static_cast<double>(v), table[v + kSpan].data());
  }
};

// Copies the first `done` bytes of dst over the rest, doubling each time:
// a repeating pattern costs a few large memcpys instead of a loop per element.
void repeatPrefix(unsigned char* dst, size_t done, size_t total) {
  while (done < total) {
    const size_t n = std::min(done, total - done);
    std::memcpy(dst + done, dst, n);
    done += n;
  }
}

template <size_t N>
void fillTyped(const ValueScheme& scheme, int rank, unsigned char* dst, size_t count) {
  const Encoded<N> enc(scheme.type());
  // One period of the inputs, then copies of it (whole periods, so the
  // pattern stays aligned with the index).
  const size_t head = std::min(count, scheme.period());
  for (size_t i = 0; i < head; ++i) std::memcpy(dst + i * N, enc.table[scheme.input(rank, i) + kSpan].data(), N);
  repeatPrefix(dst, head * N, count * N);
}

// Reads element i of a buffer as double. The switch on the type happens
// once per buffer (template instantiation), not once per element.
template <class T>
struct PlainReader {
  const T* p;
  double operator()(size_t i) const { return static_cast<double>(p[i]); }
};

// 8- and 16-bit floating formats decode through a table of every bit pattern.
struct TableReader {
  const unsigned char* p;
  size_t width;
  const std::vector<double>* table;
  double operator()(size_t i) const {
    uint32_t bits = p[i * width];
    if (width == 2) bits |= static_cast<uint32_t>(p[i * width + 1]) << 8;
    return (*table)[bits];
  }
};

template <class Reader>
size_t countWith(const ValueScheme& scheme, const Reader& read, const std::vector<Segment>& segments) {
  // Expected values and tolerances repeat with the scheme's period: tabulate
  // one period per segment and walk it alongside the buffer.
  const size_t period = scheme.period();
  std::vector<double> want(period);
  std::vector<double> tol(period);
  size_t wrong = 0;
  for (const Segment& s : segments) {
    for (size_t p = 0; p < period; ++p) {
      const size_t idx = s.srcOffset + p;
      want[p] = s.reduced ? scheme.reduced(idx) : static_cast<double>(scheme.input(s.srcRank, idx));
      tol[p] = scheme.tolerance(want[p]);
    }
    size_t p = 0;
    for (size_t j = 0; j < s.count; ++j) {
      const double got = read(s.recvOffset + j);
      // Written so that NaN (the poison of floating types) counts as wrong.
      if (!(std::fabs(got - want[p]) <= tol[p])) ++wrong;
      if (++p == period) p = 0;
    }
  }
  return wrong;
}

std::vector<double> decodeTable(ncclDataType_t type, size_t width) {
  std::vector<double> table(size_t{1} << (8 * width));
  for (size_t bits = 0; bits < table.size(); ++bits) {
    unsigned char raw[2] = {static_cast<unsigned char>(bits & 0xff), static_cast<unsigned char>(bits >> 8)};
    table[bits] = decodeValue(type, raw);
  }
  return table;
}

}  // namespace

void fillInput(const ValueScheme& scheme, int rank, void* dst, size_t count) {
  auto* d = static_cast<unsigned char*>(dst);
  switch (typeInfo(scheme.type()).size) {
    case 1:
      return fillTyped<1>(scheme, rank, d, count);
    case 2:
      return fillTyped<2>(scheme, rank, d, count);
    case 4:
      return fillTyped<4>(scheme, rank, d, count);
    default:
      return fillTyped<8>(scheme, rank, d, count);
  }
}

void fillPoison(ncclDataType_t type, void* dst, size_t count) {
  const size_t width = typeInfo(type).size;
  unsigned char poison[8];
  poisonValue(type, poison);
  auto* d = static_cast<unsigned char*>(dst);
  if (count == 0) return;
  std::memcpy(d, poison, width);
  repeatPrefix(d, width, count * width);
}

size_t countWrong(const ValueScheme& scheme, const void* recv, const std::vector<Segment>& segments) {
  const ncclDataType_t type = scheme.type();
  switch (type) {
    case ncclInt8:
      return countWith(scheme, PlainReader<int8_t>{static_cast<const int8_t*>(recv)}, segments);
    case ncclUint8:
      return countWith(scheme, PlainReader<uint8_t>{static_cast<const uint8_t*>(recv)}, segments);
    case ncclInt32:
      return countWith(scheme, PlainReader<int32_t>{static_cast<const int32_t*>(recv)}, segments);
    case ncclUint32:
      return countWith(scheme, PlainReader<uint32_t>{static_cast<const uint32_t*>(recv)}, segments);
    case ncclInt64:
      return countWith(scheme, PlainReader<int64_t>{static_cast<const int64_t*>(recv)}, segments);
    case ncclUint64:
      return countWith(scheme, PlainReader<uint64_t>{static_cast<const uint64_t*>(recv)}, segments);
    case ncclFloat32:
      return countWith(scheme, PlainReader<float>{static_cast<const float*>(recv)}, segments);
    case ncclFloat64:
      return countWith(scheme, PlainReader<double>{static_cast<const double*>(recv)}, segments);
    default: {
      const size_t width = typeInfo(type).size;
      const std::vector<double> table = decodeTable(type, width);
      return countWith(scheme, TableReader{static_cast<const unsigned char*>(recv), width, &table}, segments);
    }
  }
}

}  // namespace chorus_bench
