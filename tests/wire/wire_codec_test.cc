// The wire quantizers of kernels/common/wire_codec.h and the block rules of
// wire_reduce.h, against bounds and references computed here in double:
// round trips within the documented error bound, zero blocks, NaN and
// infinities arriving as NaN (and only where they were), denormal inputs,
// partial blocks, and piece sizes that always hold whole blocks inside one
// slot (a block never straddles a slot); and the host loops' AVX2 build
// writing the same bits as their baseline build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "host/host_reduce.h"
#include "host/wire_blocks.h"
#include "kernels/common/wire_codec.h"
#include "kernels/common/wire_reduce.h"

namespace chorus::wire {
namespace {

const Format kCompressed[] = {Format::Bf16, Format::Fp8, Format::Int8};

const char* name(Format f) {
  switch (f) {
    case Format::Bf16:
      return "bf16";
    case Format::Fp8:
      return "fp8";
    case Format::Int8:
      return "int8";
    default:
      return "native";
  }
}

std::vector<float> roundTrip(Format f, const std::vector<float>& v, uint32_t* bytes = nullptr) {
  std::vector<uint8_t> enc(encodedBytes(f, 4, v.size()) + 16, 0xee);
  std::vector<float> dec(v.size()), direct(v.size());
  uint32_t w = 0;
  for (size_t i = 0; i < v.size(); i += kWireBlockElems) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(kWireBlockElems, v.size() - i));
    w += encodeBlock(f, v.data() + i, n, enc.data() + w, direct.data() + i);
  }
  EXPECT_EQ(w, encodedBytes(f, 4, v.size())) << name(f);
  uint32_t r = 0;
  for (size_t i = 0; i < v.size(); i += kWireBlockElems) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(kWireBlockElems, v.size() - i));
    r += decodeBlock<false>(f, enc.data() + r, n, dec.data() + i);
  }
  EXPECT_EQ(r, w);
  // What the encoder says the receiver decodes is what it decodes.
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_TRUE(std::memcmp(&dec[i], &direct[i], 4) == 0 || (std::isnan(dec[i]) && std::isnan(direct[i]))) << i;
  if (bytes) *bytes = w;
  return dec;
}

// docs/wire.md's per-element bound for element x of a block of absmax A.
double bound(Format f, double x, double A) {
  switch (f) {
    case Format::Bf16:
      return std::max(std::ldexp(std::fabs(x), -8), std::ldexp(1.0, -134));  // denormals: bf16's grid
    case Format::Fp8:
      return std::ldexp(std::fabs(x), -4) + std::ldexp(A / 448.0, -10) + A * 1e-7;
    default:
      return A / 254.0 + A * 2.5e-7 + std::ldexp(1.0, -149);
  }
}

double absmax(const std::vector<float>& v, size_t b) {
  double a = 0;
  for (size_t i = b; i < std::min(v.size(), b + kWireBlockElems); ++i)
    if (std::isfinite(v[i])) a = std::max(a, std::fabs(double(v[i])));
  return a;
}

void expectWithinBound(Format f, const std::vector<float>& v) {
  const std::vector<float> d = roundTrip(f, v);
  for (size_t i = 0; i < v.size(); ++i) {
    const double A = absmax(v, i / kWireBlockElems * kWireBlockElems);
    ASSERT_LE(std::fabs(double(d[i]) - v[i]), bound(f, v[i], A))
        << name(f) << " element " << i << " value " << v[i] << " decoded " << d[i];
  }
}

TEST(WireCodec, RoundTripWithinBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (Format f : kCompressed) {
    for (size_t count : {size_t(1), size_t(255), size_t(256), size_t(257), size_t(1000), size_t(4096)}) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = g(rng) * std::ldexp(1.0f, int(i % 40) - 20);
      expectWithinBound(f, v);
    }
  }
}

TEST(WireCodec, EncodedSizesAndExactValues) {
  // Values the formats hold exactly come back exactly.
  std::vector<float> v = {0.0f, 1.0f, -2.0f, 3.0f, 127.0f, -127.0f, 64.0f};
  for (Format f : kCompressed) {
    uint32_t bytes = 0;
    const std::vector<float> d = roundTrip(f, v, &bytes);
    EXPECT_EQ(bytes, f == Format::Bf16 ? 2 * v.size() : 4 + v.size()) << name(f);
    if (f == Format::Fp8) continue;  // fp8 scales 127 to 448: 1 and 64 are not on its grid then
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(d[i], v[i]) << name(f) << " " << i;
  }
  EXPECT_EQ(encodedBytes(Format::Int8, 4, 513), 3 * 4 + 513u);
  EXPECT_EQ(encodedBytes(Format::Native, 8, 513), 513u * 8);
}

TEST(WireCodec, ZeroBlocksDecodeToZero) {
  for (Format f : kCompressed) {
    std::vector<float> v(600, 0.0f);
    for (size_t i = 300; i < 600; ++i) v[i] = 1.0f + float(i);  // block 0 zero, blocks 1 and 2 not
    const std::vector<float> d = roundTrip(f, v);
    for (size_t i = 0; i < 256; ++i) ASSERT_EQ(d[i], 0.0f) << name(f);
    float scale;
    std::vector<uint8_t> enc(2048);
    encodeBlock(f, v.data(), 256, enc.data(), nullptr);
    if (f != Format::Bf16) {
      std::memcpy(&scale, enc.data(), 4);
      EXPECT_EQ(scale, 0.0f) << name(f);
    }
  }
}

TEST(WireCodec, NonFiniteArrivesAsNanOnlyWhereItWas) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (Format f : kCompressed) {
    std::vector<float> v(300);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 17) - 8.0f;
    v[3] = nan;
    v[10] = inf;
    v[270] = -inf;
    const std::vector<float> d = roundTrip(f, v);
    for (size_t i = 0; i < v.size(); ++i) {
      if (i == 3 || i == 10 || i == 270)
        EXPECT_TRUE(std::isnan(d[i])) << name(f) << " " << i << " " << d[i];
      else
        EXPECT_LE(std::fabs(d[i] - v[i]), bound(f, v[i], 8.0)) << name(f) << " " << i;
    }
  }
  // bf16 overflow (a finite float beyond bf16's range) is not an infinity on the wire.
  std::vector<float> big = {std::numeric_limits<float>::max()};
  EXPECT_TRUE(std::isnan(roundTrip(Format::Bf16, big)[0]));
}

TEST(WireCodec, DenormalsAndTinyBlocks) {
  for (Format f : kCompressed) {
    std::vector<float> v(256);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(float(int(i) - 128), -140);  // denormal range
    v[0] = std::numeric_limits<float>::denorm_min();
    const std::vector<float> d = roundTrip(f, v);
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_TRUE(std::isfinite(d[i])) << name(f) << " " << i;
      // Tiny blocks: the absolute error stays at the denormal grid's scale.
      ASSERT_LE(std::fabs(double(d[i]) - v[i]), std::max(bound(f, v[i], absmax(v, 0)), std::ldexp(1.0, -138)))
          << name(f) << " " << i;
    }
  }
}

TEST(WireCodec, PiecesHoldWholeBlocksInsideOneSlot) {
  for (Format f : {Format::Native, Format::Bf16, Format::Fp8, Format::Int8}) {
    for (uint32_t nb : {1u, 2u, 4u, 8u}) {
      for (uint32_t slot : {8192u, 12345u, 16384u, 131072u}) {
        const uint64_t p = pieceElemsFor(f, nb, slot);
        EXPECT_EQ(p % kWireBlockElems, 0u);
        EXPECT_LE(encodedBytes(f, nb, p), slot) << name(f) << " " << nb << " " << slot;
        EXPECT_GT(encodedBytes(f, nb, p + kWireBlockElems), slot) << "the piece fills its slot";
      }
    }
  }
}

TEST(WireReduce, ErrorFeedbackKeepsWhatQuantizationDropped) {
  // sendBlock with a residual: (x + r_old) == decoded + r_new, element by element.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (Format f : kCompressed) {
    std::vector<float> x(256), r(256), r0(256), dec(256);
    for (size_t i = 0; i < 256; ++i) {
      x[i] = u(rng);
      r0[i] = r[i] = u(rng) * 0.01f;
    }
    std::vector<uint8_t> enc(1024);
    sendBlock(f, FuncSum<float>{}, false, x.data(), r.data(), 256, enc.data());
    decodeBlock<false>(f, enc.data(), 256, dec.data());
    for (size_t i = 0; i < 256; ++i)
      EXPECT_NEAR(double(x[i]) + r0[i], double(dec[i]) + r[i], 1e-6) << name(f) << " " << i;
  }
}

TEST(WireReduce, HostSumEncodesThePartialsOnceAndKeepsTheLoss) {
  // Two-level form: a rank's partial is x + r exact (its residual cleared);
  // the combiner's encoded sum plus its new residual is the exact sum of the
  // partials, its input and its old residual.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (Format f : kCompressed) {
    std::vector<float> a(256), ra(256), b(256), rb(256), rb0(256), dec(256);
    for (size_t i = 0; i < 256; ++i) {
      a[i] = u(rng);
      ra[i] = u(rng) * 0.01f;
      b[i] = u(rng) * 4.0f;
      rb0[i] = rb[i] = u(rng) * 0.01f;
    }
    std::vector<uint8_t> part(256 * 4), enc(1024);
    const std::vector<float> ra0 = ra;
    ASSERT_EQ(partialBlock(FuncSum<float>{}, a.data(), ra.data(), 256, part.data()), 1024u);
    const uint8_t* in[2] = {part.data(), nullptr};
    const uint8_t partial[2] = {1, 0};
    OwnerBlock<float> blk{};
    blk.format = f;
    blk.nranks = 2;
    blk.self = 1;
    blk.in = in;
    blk.partial = partial;
    blk.x = b.data();
    blk.residual = rb.data();
    blk.n = 256;
    blk.out = enc.data();
    blk.lossScale = 1.0f;
    hostSumBlock(blk, FuncSum<float>{});
    EXPECT_EQ(blk.outBytes, encodedBytes(f, 4, 256)) << name(f);
    decodeBlock<false>(f, enc.data(), 256, dec.data());
    for (size_t i = 0; i < 256; ++i) {
      EXPECT_EQ(ra[i], 0.0f);
      const double exact = (double(a[i]) + ra0[i]) + (double(b[i]) + rb0[i]);
      EXPECT_NEAR(exact, double(dec[i]) + rb[i], 1e-5) << name(f) << " " << i;
    }
  }
}

// Everything the host loops write for one piece at the active SIMD level:
// the contribution (with error feedback), the owner's result with its
// encoding and residual, and the gathered decode. NaN payloads are not
// compared (only that a NaN is there).
std::vector<uint32_t> hostLoopBits(Format f, ncclDataType_t t, ReduceKind k, const std::vector<float>& in) {
  const size_t n = in.size(), eb = t == ncclFloat32 ? 4 : 2;
  std::vector<uint8_t> x(n * eb), y(n * eb), enc(encodedBytes(f, 4, n) + 64), peer(enc.size()), res(enc.size());
  for (size_t i = 0; i < n; ++i) {
    const float v = in[i];
    const uint16_t h = t == ncclFloat16 ? floatToHalf(v).bits : floatToBf16(v).bits;
    std::memcpy(&x[i * eb], t == ncclFloat32 ? static_cast<const void*>(&v) : &h, eb);
  }
  std::vector<float> r(n, 0.001f), r2(n, -0.002f);
  const host::WirePiece p{f, t, k, nullptr, 3, n};
  std::vector<uint32_t> bits;
  const auto add = [&](const void* data, size_t bytes, size_t width) {
    for (size_t o = 0; o + width <= bytes; o += width) {
      uint32_t u = 0;
      std::memcpy(&u, static_cast<const uint8_t*>(data) + o, width);
      const bool nan = width == 4 ? (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)
                                  : width == 2 && (t == ncclFloat16 ? (u & 0x7c00u) == 0x7c00u && (u & 0x3ffu)
                                                                    : (u & 0x7f80u) == 0x7f80u && (u & 0x7fu));
      bits.push_back(nan ? 0xffffffffu : u);
    }
  };
  const uint32_t sent = host::wireSend(p, x.data(), r.data(), enc.data());
  add(enc.data(), sent, 1);
  add(r.data(), n * 4, 4);
  host::wireSend(p, x.data(), nullptr, peer.data());
  const uint8_t* ins[3] = {peer.data(), nullptr, enc.data()};
  const uint32_t own = host::wireOwn(p, {3, 1, ins, nullptr, x.data(), r2.data(), y.data(), res.data()});
  add(res.data(), own, 1);
  add(y.data(), n * eb, eb);
  add(r2.data(), n * 4, 4);
  // The two-level form: an fp32 partial, and a host's sum of it with x.
  std::vector<uint8_t> part(n * 4);
  add(part.data(), host::wirePartial(p, x.data(), r2.data(), part.data()), 1);
  add(r2.data(), n * 4, 4);
  const uint8_t* sumIns[2] = {part.data(), nullptr};
  const uint8_t partial[2] = {1, 0};
  const uint32_t sum = host::wireHostSum(p, {2, 1, sumIns, partial, x.data(), r.data(), nullptr, res.data()});
  add(res.data(), sum, 1);
  add(r.data(), n * 4, 4);
  host::wireGather(p, res.data(), y.data());
  add(y.data(), n * eb, eb);
  return bits;
}

TEST(WireHostLoops, Avx2BuildGivesTheBaselineBits) {
  if (host::detectedSimdLevel() != host::SimdLevel::Avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(256 * 9 + 100);  // whole blocks and a partial one
  for (size_t i = 0; i < v.size(); ++i) v[i] = g(rng) * std::ldexp(1.0f, int(rng() % 50) - 25);
  const float inf = std::numeric_limits<float>::infinity();
  v[3] = std::numeric_limits<float>::quiet_NaN(), v[300] = inf, v[301] = -inf, v[302] = -0.0f;
  v[600] = std::ldexp(1.0f, -140), v[601] = 3e38f;
  for (size_t i = 256 * 4; i < 256 * 5; ++i) v[i] = 0.0f;  // an all-zero block
  const host::SimdLevel previous = host::setSimdLevel(host::SimdLevel::Portable);
  for (Format f : {Format::Native, Format::Bf16, Format::Fp8, Format::Int8})
    for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclBfloat16})
      for (ReduceKind k : {ReduceKind::Sum, ReduceKind::SumPostDiv}) {
        host::setSimdLevel(host::SimdLevel::Portable);
        const std::vector<uint32_t> base = hostLoopBits(f, t, k, v);
        host::setSimdLevel(host::SimdLevel::Avx2);
        EXPECT_EQ(hostLoopBits(f, t, k, v), base) << name(f) << " type " << int(t) << " kind " << int(k);
      }
  host::setSimdLevel(previous);
}

}  // namespace
}  // namespace chorus::wire
