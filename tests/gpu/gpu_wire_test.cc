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
#include "kernels/launch.h"

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

// Residuals compared bit for bit (float == would take -0 for +0).
bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
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
    EXPECT_TRUE(sameBits(host.residual[size_t(k)], gpu.residual[size_t(k)]))
        << what << ": rank " << k << "'s residuals differ";
  }
}

// 3 x 128 Ki floats and a ragged end: several pieces of the wire slots and a
// partial last block, so blocks split among threads and pieces both matter.
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

// A float all-reduce of `w` on 2 ranks on device 0: the host-mode result
// of two calls on the same inputs first, then the GPU-mode ranks with every
// rank's input uploaded and its output and zeroed residual on the device.
class DeviceAllReduce {
 public:
  explicit DeviceAllReduce(const WireRun& w)
      : w_(w), bytes_(w.count * sizeof(float)), in_(inputsOf(w)), hostError_(runHost(w_, in_, &host_)) {}

  // Call first: checks the reference and the ranks, uploads the inputs.
  void setUp() {
    ASSERT_EQ(hostError_, "");
    ASSERT_TRUE(g_.error().empty()) << g_.error();
    for (int k = 0; k < ranks(); ++k) {
      send_.emplace_back(0, bytes_);
      recv_.emplace_back(0, bytes_);
      residual_.emplace_back(0, bytes_);
      CUDA_OK(upload(send_.back().get(), in_[size_t(k)].data(), bytes_, g_.stream(k)));
      CUDA_OK(cudaMemsetAsync(residual_.back().get(), 0, bytes_, g_.stream(k)));
    }
  }

  GpuRanks& gpu() { return g_; }
  int ranks() const { return g_.size(); }
  float* deviceResidual(int k) { return static_cast<float*>(residual_[size_t(k)].get()); }

  // One grouped call on every rank, with residual(k) as rank k's residual.
  template <typename ResidualOf>
  ncclResult_t callAll(ResidualOf residual) {
    ncclGroupStart();
    for (int k = 0; k < ranks(); ++k) {
      WireRun call = w_;
      call.feedback = residual(k) != nullptr;
      issue(call, send_[size_t(k)].get(), recv_[size_t(k)].get(), residual(k), g_.comm(k), g_.stream(k));
    }
    return ncclGroupEnd();
  }

  // Every rank's output and residual must be the host's after its two calls.
  void expectTheHosts(const char* when) {
    ASSERT_EQ(g_.sync(), "");
    for (int k = 0; k < ranks(); ++k) {
      std::vector<unsigned char> out(bytes_);
      std::vector<float> res(w_.count);
      CUDA_OK(download(out.data(), recv_[size_t(k)].get(), bytes_, g_.stream(k)));
      CUDA_OK(download(res.data(), deviceResidual(k), bytes_, g_.stream(k)));
      ASSERT_EQ(g_.sync(), "");
      EXPECT_TRUE(out == host_.out[size_t(k)]) << "rank " << k << ": the output " << when << " is not the host's";
      EXPECT_TRUE(sameBits(res, host_.residual[size_t(k)])) << "rank " << k << ": the residuals " << when << " differ";
    }
  }

 private:
  static std::vector<std::vector<unsigned char>> inputsOf(const WireRun& w) {
    std::vector<std::vector<unsigned char>> in(2);
    for (int k = 0; k < 2; ++k) in[size_t(k)] = inputOf(w, k, w.count);
    return in;
  }

  const WireRun w_;
  const size_t bytes_;
  const std::vector<std::vector<unsigned char>> in_;
  Results host_;
  const std::string hostError_;  // runHost's: made before any GPU-mode rank exists
  ModeScope mode_{chorusModeGpu};
  GpuRanks g_{{0, 0}};
  std::vector<DevMem> send_, recv_, residual_;
};

// Under CUDA graph capture: one compressed all-reduce with a residual,
// captured once and replayed twice, leaves the outputs and residuals of two
// host-mode calls (the residual pointer is part of the captured launch, and
// each replay updates it).
TEST(GpuWireGraph, ReplaysOfACapturedCompressedCallAreTheHostsCalls) {
  CHORUS_REQUIRE_GPU();
  DeviceAllReduce run({ncclFloat32, ncclSum, false, kCount, chorusWireInt8, true, 0});
  ASSERT_NO_FATAL_FAILURE(run.setUp());
  GpuRanks& g = run.gpu();
  const auto none = [](int) -> float* { return nullptr; };
  const auto onDevice = [&](int k) { return run.deviceResidual(k); };
  // Connections are set up lazily, outside the capture (no residual: it stays zero).
  ASSERT_EQ(run.callAll(none), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");
  for (int k = 0; k < g.size(); ++k) CUDA_OK(cudaStreamBeginCapture(g.stream(k), cudaStreamCaptureModeThreadLocal));
  const ncclResult_t captured = run.callAll(onDevice);
  std::vector<cudaGraphExec_t> execs(size_t(g.size()), nullptr);
  for (int k = 0; k < g.size(); ++k) {
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamEndCapture(g.stream(k), &graph));
    CUDA_OK(cudaGraphInstantiate(&execs[size_t(k)], graph, 0));
    cudaGraphDestroy(graph);
  }
  ASSERT_EQ(captured, ncclSuccess) << ncclGetLastError(nullptr);
  for (int replay = 0; replay < 2; ++replay) {
    for (int k = 0; k < g.size(); ++k) {
      const cudaError_t launched = cudaGraphLaunch(execs[size_t(k)], g.stream(k));
      if (launched != cudaSuccess) g.abortAll();  // earlier ranks' replays wait for this one
      ASSERT_EQ(launched, cudaSuccess) << "cudaGraphLaunch: " << cudaGetErrorString(launched);
    }
    ASSERT_EQ(g.sync(), "");
  }
  run.expectTheHosts("after two replays");
  for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
}

// A residual the GPU cannot reach (plain host memory) is refused with
// ncclInvalidArgument and a message naming it, before any kernel runs; the
// communicators stay usable, and the same call with a device residual then
// gives the host's result.
TEST(GpuWireArgs, AHostResidualIsRefusedAndTheCommunicatorsStayUsable) {
  CHORUS_REQUIRE_GPU();
  const WireRun w{ncclFloat32, ncclSum, false, 4096, chorusWireInt8, true, 0};
  DeviceAllReduce run(w);
  ASSERT_NO_FATAL_FAILURE(run.setUp());
  GpuRanks& g = run.gpu();
  std::vector<std::vector<float>> hostResidual(size_t(g.size()), std::vector<float>(w.count, 0.0f));
  EXPECT_EQ(run.callAll([&](int k) { return hostResidual[size_t(k)].data(); }), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("residual"), std::string::npos) << ncclGetLastError(nullptr);
  for (int k = 0; k < g.size(); ++k) {
    ncclResult_t async = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(g.comm(k), &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess) << "rank " << k << ": a refused argument must not break the communicator";
  }
  for (int call = 0; call < 2; ++call)  // two calls, as the host reference makes
    ASSERT_EQ(run.callAll([&](int k) { return run.deviceResidual(k); }), ncclSuccess) << ncclGetLastError(nullptr);
  run.expectTheHosts("after a refused call");
}

// The wire kernels need more per-thread stack than CUDA's default limit.
// A launch that needs more than the limit makes the driver grow it, which
// waits for the device to go idle, so a wire launch queued behind another
// rank's spinning kernel would never start. Communicator setup reserves the
// largest stack of the build's kernels before any launch.
TEST(GpuWireStack, CommunicatorSetupReservesTheKernelsStack) {
  CHORUS_REQUIRE_GPU();
  ModeScope mode(chorusModeGpu);
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  CUDA_OK(cudaSetDevice(0));
  size_t needed = 0, limit = 0;
  CUDA_OK(dev::preloadLaneKernels(&needed));
  CUDA_OK(cudaDeviceGetLimit(&limit, cudaLimitStackSize));
  EXPECT_GT(needed, 0u) << "the wire kernels keep blocks of 256 elements on the stack";
  EXPECT_GE(limit, needed) << "the stack limit must cover every kernel before the first launch";
}

}  // namespace
}  // namespace chorus::gputest
