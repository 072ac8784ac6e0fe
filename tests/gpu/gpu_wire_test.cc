// Compressed wires and deterministic mode in GPU mode (docs/wire.md): the
// wire kernel runs kernels/common/wire_piece.h's loops, the code host mode
// runs, so every result and every error-feedback residual must be identical
// to the bit to host mode's for the same inputs: deterministic all-reduce and
// reduce-scatter of order-sensitive float, half and bfloat16 data and an
// int32 max, and the three compressed formats with and without a residual,
// on 2 and 4 ranks (all on device 0 in GPU mode), and replays of a captured
// CUDA graph. Host mode's results are
// checked against their bounds by the host tests (tests/wire/). Skips
// without a GPU.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_coll_util.h"
#include "gpu/gpu_test_util.h"

namespace chorus::gputest {
namespace {

struct WireRun {
  ncclDataType_t type;
  ncclRedOp_t op;
  bool reduceScatter;
  size_t count;  // per-rank output elements
  chorusWire_t wire;
  bool feedback;
  int deterministic;
};

std::string describe(const WireRun& w, int n) {
  return std::string(w.reduceScatter ? "ReduceScatter " : "AllReduce ") + typeName(w.type) + " wire " +
         std::to_string(int(w.wire)) + (w.feedback ? " with residual" : "") +
         (w.deterministic ? " deterministic" : "") + " count " + std::to_string(w.count) + " on " + std::to_string(n) +
         " ranks";
}

size_t inputCount(const WireRun& w, int n) { return w.reduceScatter ? w.count * size_t(n) : w.count; }

// Values whose sums depend on the order, with exponents spread enough that
// quantization is lossy: a random sign, mantissa and exponent per element.
std::vector<unsigned char> inputOf(const WireRun& w, int rank, size_t count) {
  uint64_t state = 0x2545f4914f6cdd1dull * uint64_t(rank + 1) + uint64_t(w.type);
  std::vector<unsigned char> out(count * typeSize(w.type));
  for (size_t i = 0; i < count; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    const double mant = 1.0 + double(state >> 11) / double(1ull << 53);
    const int e = int((state >> 3) % 13) - 6;
    const double v = (state & 1 ? -mant : mant) * std::ldexp(1.0, e);
    storeValue(w.type, out.data(), i, w.type == ncclInt32 ? std::floor(v * 1000.0) : v);
  }
  return out;
}

ncclResult_t issue(const WireRun& w, const void* send, void* recv, float* residual, ncclComm_t comm, cudaStream_t s) {
  chorusReduceConfig_t cfg = CHORUS_REDUCE_CONFIG_INIT;
  cfg.wire = w.wire;
  cfg.residual = residual;
  cfg.deterministic = w.deterministic;
  if (w.reduceScatter) return chorusReduceScatterEx(send, recv, w.count, w.type, w.op, &cfg, comm, s);
  return chorusAllReduceEx(send, recv, w.count, w.type, w.op, &cfg, comm, s);
}

struct Results {
  std::vector<std::vector<unsigned char>> out;
  std::vector<std::vector<float>> residual;
};

// Host mode: n CPU ranks; GPU mode: n ranks on device 0.
std::string initComms(int n, bool gpu, std::vector<ncclComm_t>* comms) {
  comms->assign(size_t(n), nullptr);
  std::vector<int> devices(size_t(n), 0);
  if (ncclCommInitAll(comms->data(), n, gpu ? devices.data() : nullptr) != ncclSuccess)
    return std::string("ncclCommInitAll: ") + ncclGetLastError(nullptr);
  return "";
}

// Two calls, so that the second one's residuals start from the first's.
std::string runHost(const WireRun& w, const std::vector<std::vector<unsigned char>>& in, Results* res) {
  const int n = int(in.size());
  ModeScope mode(chorusModeHost);
  std::vector<ncclComm_t> comms;
  std::string why = initComms(n, false, &comms);
  if (!why.empty()) return "host mode: " + why;
  res->out.assign(size_t(n), std::vector<unsigned char>(w.count * typeSize(w.type), 0xee));
  res->residual.assign(size_t(n), std::vector<float>(w.feedback ? inputCount(w, n) : 0, 0.0f));
  for (int call = 0; call < 2 && why.empty(); ++call) {
    ncclResult_t r = ncclGroupStart();
    for (int k = 0; k < n && r == ncclSuccess; ++k)
      r = issue(w, in[size_t(k)].data(), res->out[size_t(k)].data(),
                w.feedback ? res->residual[size_t(k)].data() : nullptr, comms[size_t(k)], nullptr);
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess || end != ncclSuccess) why = std::string("host mode call: ") + ncclGetLastError(nullptr);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  return why;
}

std::string runGpu(const WireRun& w, const std::vector<std::vector<unsigned char>>& in, Results* res) {
  const int n = int(in.size());
  const size_t outBytes = w.count * typeSize(w.type), resBytes = w.feedback ? inputCount(w, n) * sizeof(float) : 0;
  ModeScope mode(chorusModeGpu);
  std::vector<ncclComm_t> comms;
  std::string why = initComms(n, true, &comms);
  if (!why.empty()) return "GPU mode: " + why;
  std::vector<DevMem> send, recv, residual;
  std::vector<cudaStream_t> streams(size_t(n), nullptr);
  cudaSetDevice(0);
  for (int k = 0; k < n; ++k) {
    cudaStreamCreateWithFlags(&streams[size_t(k)], cudaStreamNonBlocking);
    send.emplace_back(0, in[size_t(k)].size());
    recv.emplace_back(0, outBytes);
    residual.emplace_back(0, resBytes);
    upload(send.back().get(), in[size_t(k)].data(), in[size_t(k)].size(), streams[size_t(k)]);
    cudaMemsetAsync(recv.back().get(), 0xee, outBytes, streams[size_t(k)]);
    cudaMemsetAsync(residual.back().get(), 0, resBytes, streams[size_t(k)]);
  }
  why = syncStreams(streams, Ms(30000));
  for (int call = 0; call < 2 && why.empty(); ++call) {
    ncclResult_t r = ncclGroupStart();
    for (int k = 0; k < n && r == ncclSuccess; ++k)
      r = issue(w, send[size_t(k)].get(), recv[size_t(k)].get(),
                w.feedback ? static_cast<float*>(residual[size_t(k)].get()) : nullptr, comms[size_t(k)],
                streams[size_t(k)]);
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess || end != ncclSuccess) why = std::string("GPU mode call: ") + ncclGetLastError(nullptr);
    if (why.empty()) why = syncStreams(streams, Ms(30000));
  }
  res->out.assign(size_t(n), std::vector<unsigned char>(outBytes));
  res->residual.assign(size_t(n), std::vector<float>(resBytes / sizeof(float)));
  for (int k = 0; k < n && why.empty(); ++k) {
    download(res->out[size_t(k)].data(), recv[size_t(k)].get(), outBytes, streams[size_t(k)]);
    download(res->residual[size_t(k)].data(), residual[size_t(k)].get(), resBytes, streams[size_t(k)]);
    why = syncStreams(streams, Ms(30000));
  }
  closeRun(comms, streams, !why.empty());
  return why;
}

void expectIdentical(const WireRun& w, int n) {
  std::vector<std::vector<unsigned char>> in;
  for (int k = 0; k < n; ++k) in.push_back(inputOf(w, k, inputCount(w, n)));
  Results host, gpu;
  const std::string what = describe(w, n);
  ASSERT_EQ(runHost(w, in, &host), "") << what;
  ASSERT_EQ(runGpu(w, in, &gpu), "") << what;
  for (int k = 0; k < n; ++k) {
    const auto& h = host.out[size_t(k)];
    const auto& d = gpu.out[size_t(k)];
    size_t differ = 0, first = 0;
    const size_t esz = typeSize(w.type);
    for (size_t i = 0; i < w.count; ++i)
      if (std::memcmp(&h[i * esz], &d[i * esz], esz) != 0 && differ++ == 0) first = i;
    EXPECT_EQ(differ, 0u) << what << ": rank " << k << ", first difference at " << first << ": host "
                          << loadValue(w.type, h.data(), first) << ", GPU " << loadValue(w.type, d.data(), first);
    EXPECT_TRUE(host.residual[size_t(k)] == gpu.residual[size_t(k)]) << what << ": rank " << k << "'s residuals differ";
  }
}

// 3 pieces of a 512 KiB slot and a ragged end, so blocks split among threads
// and pieces both matter.
constexpr size_t kCount = 3 * 131072 + 1000;

class GpuWire : public ::testing::TestWithParam<int> {};  // the rank count

TEST_P(GpuWire, DeterministicResultsAreTheHostsBitForBit) {
  CHORUS_REQUIRE_GPU();
  const int n = GetParam();
  for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
    expectIdentical({t, ncclSum, false, kCount, chorusWireNative, false, 1}, n);
    expectIdentical({t, ncclAvg, true, kCount / 4, chorusWireNative, false, 1}, n);
  }
  expectIdentical({ncclInt32, ncclMax, false, kCount, chorusWireNative, false, 1}, n);
}

TEST_P(GpuWire, CompressedResultsAndResidualsAreTheHostsBitForBit) {
  CHORUS_REQUIRE_GPU();
  const int n = GetParam();
  for (chorusWire_t f : {chorusWireBfloat16, chorusWireFloat8e4m3, chorusWireInt8}) {
    expectIdentical({ncclFloat32, ncclSum, false, kCount, f, true, 0}, n);
    expectIdentical({ncclBfloat16, ncclAvg, false, kCount, f, false, 0}, n);
    expectIdentical({ncclFloat16, ncclSum, true, kCount / 4, f, true, 0}, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, GpuWire, ::testing::Values(2, 4));

// Under CUDA graph capture: one compressed all-reduce with a residual,
// captured once and replayed twice, leaves the outputs and residuals of two
// host-mode calls (the residual pointer is part of the captured launch, and
// each replay updates it).
TEST(GpuWireGraph, ReplaysOfACapturedCompressedCallAreTheHostsCalls) {
  CHORUS_REQUIRE_GPU();
  const int n = 2;
  const WireRun w{ncclFloat32, ncclSum, false, kCount, chorusWireInt8, true, 0};
  std::vector<std::vector<unsigned char>> in;
  for (int k = 0; k < n; ++k) in.push_back(inputOf(w, k, w.count));
  Results host;
  ASSERT_EQ(runHost(w, in, &host), "");

  ModeScope mode(chorusModeGpu);
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  const size_t bytes = w.count * sizeof(float);
  std::vector<DevMem> send, recv, residual;
  for (int k = 0; k < n; ++k) {
    send.emplace_back(0, bytes);
    recv.emplace_back(0, bytes);
    residual.emplace_back(0, bytes);
    CUDA_OK(upload(send.back().get(), in[size_t(k)].data(), bytes, g.stream(k)));
    CUDA_OK(cudaMemsetAsync(residual.back().get(), 0, bytes, g.stream(k)));
  }
  const auto callAll = [&](bool withResidual) {
    ncclGroupStart();
    for (int k = 0; k < n; ++k) {
      WireRun call = w;
      call.feedback = withResidual;
      issue(call, send[size_t(k)].get(), recv[size_t(k)].get(),
            withResidual ? static_cast<float*>(residual[size_t(k)].get()) : nullptr, g.comm(k), g.stream(k));
    }
    return ncclGroupEnd();
  };
  // Connections are set up lazily, outside the capture (no residual: it stays zero).
  ASSERT_EQ(callAll(false), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");
  for (int k = 0; k < n; ++k) CUDA_OK(cudaStreamBeginCapture(g.stream(k), cudaStreamCaptureModeThreadLocal));
  const ncclResult_t captured = callAll(true);
  std::vector<cudaGraphExec_t> execs(size_t(n), nullptr);
  for (int k = 0; k < n; ++k) {
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamEndCapture(g.stream(k), &graph));
    CUDA_OK(cudaGraphInstantiate(&execs[size_t(k)], graph, 0));
    cudaGraphDestroy(graph);
  }
  ASSERT_EQ(captured, ncclSuccess) << ncclGetLastError(nullptr);
  for (int replay = 0; replay < 2; ++replay) {
    for (int k = 0; k < n; ++k) CUDA_OK(cudaGraphLaunch(execs[size_t(k)], g.stream(k)));
    ASSERT_EQ(g.sync(), "");
  }
  for (int k = 0; k < n; ++k) {
    std::vector<unsigned char> out(bytes);
    std::vector<float> res(w.count);
    CUDA_OK(download(out.data(), recv[size_t(k)].get(), bytes, g.stream(k)));
    CUDA_OK(download(res.data(), residual[size_t(k)].get(), bytes, g.stream(k)));
    ASSERT_EQ(g.sync(), "");
    EXPECT_TRUE(out == host.out[size_t(k)]) << "rank " << k << ": the second replay's output is not the host's";
    EXPECT_TRUE(res == host.residual[size_t(k)]) << "rank " << k << ": residuals after two replays differ";
  }
  for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
}

}  // namespace
}  // namespace chorus::gputest
