// The standalone reduction kernel against the host reduction loops: for every
// (datatype, reduction) this build compiled, random inputs reduced on the GPU
// must equal, bit for bit, what host::reduce computes, for aligned and
// misaligned buffers and a ragged length.
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "host/host_reduce.h"
#include "kernels/launch.h"

namespace chorus {
namespace {

using gputest::DeviceBuffer;

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                 ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const ReduceKind kKinds[] = {ReduceKind::Sum, ReduceKind::Prod,      ReduceKind::Max,
                             ReduceKind::Min, ReduceKind::PreMulSum, ReduceKind::SumPostDiv};

// Random bytes, except that floating types get finite small values so NaN
// payloads do not make the comparison depend on which NaN is kept.
std::vector<uint8_t> randomElems(ncclDataType_t t, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n * typeSize(t));
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  auto fill = [&](auto* p, auto make) {
    for (size_t i = 0; i < n; ++i) p[i] = make();
  };
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  if (t == ncclFloat32) fill(reinterpret_cast<float*>(v.data()), [&] { return d(rng); });
  if (t == ncclFloat64) fill(reinterpret_cast<double*>(v.data()), [&] { return double(d(rng)); });
  if (t == ncclFloat16 || t == ncclBfloat16) {
    // Small exponents: clear the top exponent bits.
    auto* p = reinterpret_cast<uint16_t*>(v.data());
    for (size_t i = 0; i < n; ++i) p[i] &= (t == ncclFloat16) ? 0xBBFF : 0xBF7F;
  }
  if (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) {
    for (size_t i = 0; i < n; ++i) v[i] &= 0xBB;  // clears bits that make NaN/Inf
  }
  return v;
}

struct Case {
  ncclDataType_t type;
  ReduceKind kind;
};

void PrintTo(const Case& c, std::ostream* os) { *os << "type " << c.type << " kind " << int(c.kind); }

class ReduceKernel : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { CHORUS_REQUIRE_GPU(); }
};

TEST_P(ReduceKernel, MatchesHostBitForBit) {
  const auto [type, kind] = GetParam();
  if (!dev::kernelCompiled(type, kind)) GTEST_SKIP() << "filtered out of this build: " << dev::kernelFilter();
  const size_t esz = typeSize(type);
  for (size_t misalign : {size_t(0), esz}) {
    const size_t n = 100003;
    auto a = randomElems(type, n + 1, 1), b = randomElems(type, n + 1, 2), scalar = randomElems(type, 1, 3);
    DeviceBuffer da(a.size()), db(b.size()), dd(a.size()), ds(scalar.size());
    ASSERT_TRUE(da.upload(a.data()) && db.upload(b.data()) && ds.upload(scalar.data()));
    for (int flags = 0; flags < 8; ++flags) {
      const bool preA = flags & 1, preB = flags & 2, post = flags & 4;
      dev::ReduceLaunch L;
      L.type = type;
      L.kind = kind;
      L.preA = preA;
      L.preB = preB;
      L.post = post;
      L.scalar = ds.get();
      L.divisor = 3;
      L.dst = dd.as<char>() + misalign;
      L.a = da.as<char>() + misalign;
      L.b = db.as<char>() + misalign;
      L.count = n;
      ASSERT_EQ(dev::launchReduce(L, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> got(a.size()), want(n * esz);
      ASSERT_TRUE(dd.download(got.data()));
      ReduceSpec spec{type, kind, scalar.data(), 3};
      host::reduce(spec, want.data(), a.data() + misalign, preA, b.data() + misalign, preB, n, post);
      ASSERT_EQ(std::memcmp(got.data() + misalign, want.data(), want.size()), 0)
          << "type " << type << " kind " << int(kind) << " flags " << flags << " misalign " << misalign;
    }
  }
}

std::vector<Case> allCases() {
  std::vector<Case> out;
  for (auto t : kTypes)
    for (auto k : kKinds) out.push_back({t, k});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndKinds, ReduceKernel, ::testing::ValuesIn(allCases()), [](const auto& info) {
  return "t" + std::to_string(info.param.type) + "_k" + std::to_string(int(info.param.kind));
});

TEST(ReduceKernelArgs, FilteredInstanceIsAnErrorNotAWrongResult) {
  CHORUS_REQUIRE_GPU();
  for (auto t : kTypes)
    for (auto k : kKinds) {
      if (dev::kernelCompiled(t, k)) continue;
      dev::ReduceLaunch L;
      L.type = t;
      L.kind = k;
      L.count = 1;
      EXPECT_EQ(dev::launchReduce(L, nullptr), cudaErrorNotSupported);
      return;
    }
  GTEST_SKIP() << "every instance is compiled in this build (filter " << dev::kernelFilter() << ")";
}

}  // namespace
}  // namespace chorus
