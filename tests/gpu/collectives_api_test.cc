// GPU mode through the public API only: in-process ranks (ncclCommInitAll
// with a device list; several ranks may share device 0), device buffers and
// one stream per rank, every collective driven from one thread inside
// ncclGroupStart/ncclGroupEnd.
//
//  - Matrix: every collective x {float, half, bfloat16, int32, int8, double}
//    x counts {0, 1, 7, 1 MiB + 7 elements}, reductions with every operator
//    (PreMulSum with a device and a host scalar). Inputs are small integers,
//    so every partial result is exact in every type and the host reference
//    must match exactly whatever order the library reduces in.
//  - Calls enqueue and return: with the streams held by a blocking host
//    function, the calls still return, and the results are right afterwards.
//  - CUDA graphs: all-reduces captured on every rank's stream, replayed 10x.
//  - Abort and timeout: a rank whose peer never calls is stopped by
//    ncclCommAbort, or fails by itself after CHORUS_TIMEOUT_MS, in bounded time.
//  - Registration (ncclCommRegister, ncclMemAlloc, windows), ncclCommCuDevice,
//    ncclGetVersion, and bit-identical results of host and GPU mode for one
//    fixed schedule on data whose sum depends on the order.
//
// Every case skips visibly without a usable GPU (CHORUS_REQUIRE_GPU).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_coll_util.h"
#include "gpu/gpu_test_util.h"

namespace chorus::gputest {
namespace {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecv };
enum class Op { Sum, Prod, Max, Min, Avg, PreMulDevice, PreMulHost, None };

const char* collName(Coll c) {
  static const char* const names[] = {"AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                      "AlltoAll",  "Gather",    "Scatter", "SendRecv"};
  return names[static_cast<int>(c)];
}
const char* opName(Op o) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg", "premul-device", "premul-host", "none"};
  return names[static_cast<int>(o)];
}
bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
bool rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter; }
bool hasInPlace(Coll c) {
  return c != Coll::AlltoAll && c != Coll::Gather && c != Coll::Scatter && c != Coll::SendRecv;
}

const std::vector<ncclDataType_t> kTypes = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt32, ncclInt8, ncclFloat64};
const std::vector<Op> kOps = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulDevice, Op::PreMulHost};

std::vector<size_t> countsFor(ncclDataType_t t) { return {0, 1, 7, (size_t{1} << 20) / typeSize(t) + 7}; }

// ---- inputs and the host reference --------------------------------------------

// Rank r's input at index i. Sum-like operators see [-8, 8], avg [0, 16]
// (integer avg then equals floor), prod +-1 or +-2: with at most 4 ranks and
// scalars up to 4, every partial result is an integer (a quarter for avg)
// that int8 and bfloat16 represent exactly.
double reduceInput(Op op, int r, size_t i) {
  if (op == Op::Prod) {
    const double mag = (i + static_cast<size_t>(r)) % 3 == 0 ? 2.0 : 1.0;
    return (i * 5 + static_cast<size_t>(r) * 3) % 7 == 0 ? -mag : mag;
  }
  const auto v = static_cast<double>((i * 7 + static_cast<size_t>(r) * 13) % 17);
  return op == Op::Avg ? v : v - 8.0;
}

// Data-movement payload: distinct per (rank, index), exact in int8 and bf16.
double payload(int r, size_t i) { return static_cast<double>((static_cast<size_t>(r) * 37 + i * 11) % 101) - 50.0; }

double preMulScalar(int r) { return r + 1.0; }

double reduced(Op op, ncclDataType_t t, int n, size_t i) {
  double acc = op == Op::Prod ? 1.0 : 0.0;
  for (int r = 0; r < n; ++r) {
    const double x = reduceInput(op, r, i);
    switch (op) {
      case Op::Prod:
        acc *= x;
        break;
      case Op::Max:
        acc = r == 0 ? x : std::max(acc, x);
        break;
      case Op::Min:
        acc = r == 0 ? x : std::min(acc, x);
        break;
      case Op::PreMulDevice:
      case Op::PreMulHost:
        acc += preMulScalar(r) * x;
        break;
      default:
        acc += x;
    }
  }
  if (op == Op::Avg) {
    const bool integer = t == ncclInt8 || t == ncclInt32;
    acc = integer ? std::trunc(acc / n) : acc / n;
  }
  return acc;
}

struct Case {
  Coll coll;
  ncclDataType_t type;
  Op op;
  size_t count;
  bool inPlace;
  int root;
  std::string describe(int n) const {
    std::ostringstream s;
    s << collName(coll) << " " << typeName(type) << " " << opName(op) << " count=" << count << " nranks=" << n
      << (inPlace ? " in-place" : " out-of-place");
    if (rooted(coll)) s << " root=" << root;
    return s.str();
  }
};

// Element counts of each rank's send and receive buffers (NCCL's semantics of `count`).
size_t sendElems(const Case& c, int n) {
  const bool whole = c.coll == Coll::ReduceScatter || c.coll == Coll::AlltoAll || c.coll == Coll::Scatter;
  return whole ? c.count * static_cast<size_t>(n) : c.count;
}
size_t recvElems(const Case& c, int n) {
  const bool whole = c.coll == Coll::AllGather || c.coll == Coll::AlltoAll || c.coll == Coll::Gather;
  return whole ? c.count * static_cast<size_t>(n) : c.count;
}

double inputAt(const Case& c, int r, size_t i) { return reduces(c.coll) ? reduceInput(c.op, r, i) : payload(r, i); }

// What rank r's receive buffer holds at i after the call; nullopt: unspecified.
std::optional<double> expectedAt(const Case& c, int n, int r, size_t i) {
  const auto ur = static_cast<size_t>(r);
  switch (c.coll) {
    case Coll::AllReduce:
      return reduced(c.op, c.type, n, i);
    case Coll::Reduce:
      if (r != c.root) return std::nullopt;
      return reduced(c.op, c.type, n, i);
    case Coll::ReduceScatter:
      return reduced(c.op, c.type, n, ur * c.count + i);
    case Coll::Broadcast:
      return payload(c.root, i);
    case Coll::AllGather:
      return payload(static_cast<int>(i / c.count), i % c.count);
    case Coll::AlltoAll:
      return payload(static_cast<int>(i / c.count), ur * c.count + i % c.count);
    case Coll::Gather:
      if (r != c.root) return std::nullopt;
      return payload(static_cast<int>(i / c.count), i % c.count);
    case Coll::Scatter:
      return payload(c.root, ur * c.count + i);
    case Coll::SendRecv:
      return payload((r + n - 1) % n, i);
  }
  return std::nullopt;
}

// ---- running one case on every rank -----------------------------------------------

constexpr int kPoisonByte = 0x7f;  // NaN or a huge value in every float type, 127 / 0x7f7f7f7f in ints

struct RankBuffers {
  DevMem send, recv;  // in-place: recv only
  const void* sendPtr = nullptr;
  void* recvPtr = nullptr;
  DevMem scalar;  // PreMulDevice
  ncclRedOp_t op = ncclSum;
  bool customOp = false;
  std::vector<unsigned char> host;  // staging for upload / download
};

ncclRedOp_t builtin(Op op) {
  switch (op) {
    case Op::Prod:
      return ncclProd;
    case Op::Max:
      return ncclMax;
    case Op::Min:
      return ncclMin;
    case Op::Avg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

ncclResult_t issue(const Case& c, GpuRanks& g, int r, const RankBuffers& b) {
  const int n = g.size();
  ncclComm_t comm = g.comm(r);
  cudaStream_t s = g.stream(r);
  switch (c.coll) {
    case Coll::AllReduce:
      return ncclAllReduce(b.sendPtr, b.recvPtr, c.count, c.type, b.op, comm, s);
    case Coll::Broadcast:
      return ncclBroadcast(b.sendPtr, b.recvPtr, c.count, c.type, c.root, comm, s);
    case Coll::Reduce:
      return ncclReduce(b.sendPtr, b.recvPtr, c.count, c.type, b.op, c.root, comm, s);
    case Coll::AllGather:
      return ncclAllGather(b.sendPtr, b.recvPtr, c.count, c.type, comm, s);
    case Coll::ReduceScatter:
      return ncclReduceScatter(b.sendPtr, b.recvPtr, c.count, c.type, b.op, comm, s);
    case Coll::AlltoAll:
      return ncclAlltoAll(b.sendPtr, b.recvPtr, c.count, c.type, comm, s);
    case Coll::Gather:
      return ncclGather(b.sendPtr, b.recvPtr, c.count, c.type, c.root, comm, s);
    case Coll::Scatter:
      return ncclScatter(b.sendPtr, b.recvPtr, c.count, c.type, c.root, comm, s);
    case Coll::SendRecv: {
      const ncclResult_t res = ncclSend(b.sendPtr, c.count, c.type, (r + 1) % n, comm, s);
      return res != ncclSuccess ? res : ncclRecv(b.recvPtr, c.count, c.type, (r + n - 1) % n, comm, s);
    }
  }
  return ncclInternalError;
}

// Prepares buffers, issues the case on every rank in one group, waits and
// compares every checked element. Returns "" or the first problems found.
std::string runCase(GpuRanks& g, const Case& c) {
  const int n = g.size();
  const size_t esz = typeSize(c.type);
  const size_t sn = sendElems(c, n);
  const size_t rn = recvElems(c, n);
  std::vector<RankBuffers> bufs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = bufs[static_cast<size_t>(r)];
    const int dev = g.device(r);
    cudaStream_t s = g.stream(r);
    // In place, the input sits at the rank's slot of the output (AllGather)
    // or the output at the rank's slot of the input (ReduceScatter).
    const size_t slot = static_cast<size_t>(r) * c.count * esz;
    const size_t inPlaceBytes = std::max(sn, rn) * esz;
    b.recv = DevMem(dev, c.inPlace ? inPlaceBytes : rn * esz);
    if (!b.recv.get()) return "cudaMalloc failed";
    if (c.inPlace) {
      b.sendPtr = c.coll == Coll::AllGather ? b.recv.bytes() + slot : b.recv.bytes();
      b.recvPtr = c.coll == Coll::ReduceScatter ? b.recv.bytes() + slot : b.recv.bytes();
    } else {
      b.send = DevMem(dev, sn * esz);
      if (!b.send.get()) return "cudaMalloc failed";
      b.sendPtr = b.send.get();
      b.recvPtr = b.recv.get();
    }
    if (cudaMemsetAsync(b.recv.get(), kPoisonByte, b.recv.size() ? b.recv.size() : 1, s) != cudaSuccess)
      return "cudaMemsetAsync failed";
    b.host.resize(sn * esz);
    for (size_t i = 0; i < sn; ++i) storeValue(c.type, b.host.data(), i, inputAt(c, r, i));
    if (upload(const_cast<void*>(b.sendPtr), b.host.data(), sn * esz, s) != cudaSuccess) return "upload failed";
    if (c.op == Op::PreMulDevice || c.op == Op::PreMulHost) {
      unsigned char scalar[8];
      storeValue(c.type, scalar, 0, preMulScalar(r));
      void* where = scalar;
      ncclScalarResidence_t residence = ncclScalarHostImmediate;
      if (c.op == Op::PreMulDevice) {
        b.scalar = DevMem(dev, esz);
        if (upload(b.scalar.get(), scalar, esz, s) != cudaSuccess) return "scalar upload failed";
        where = b.scalar.get();
        residence = ncclScalarDevice;
      }
      const ncclResult_t res = ncclRedOpCreatePreMulSum(&b.op, where, c.type, residence, g.comm(r));
      if (res != ncclSuccess) return std::string("ncclRedOpCreatePreMulSum: ") + ncclGetErrorString(res);
      b.customOp = true;
    } else {
      b.op = builtin(c.op);
    }
  }
  // The uploads must land before the collectives read them (host buffers are
  // reused below), so drain the streams first.
  std::string why = g.sync();
  if (!why.empty()) return "before the call: " + why;

  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < n && res == ncclSuccess; ++r) res = issue(c, g, r, bufs[static_cast<size_t>(r)]);
  const ncclResult_t endRes = ncclGroupEnd();
  if (res != ncclSuccess || endRes != ncclSuccess) {
    g.abortAll();  // some ranks may have launched and now wait for the others
    return std::string("call failed: ") + ncclGetErrorString(res != ncclSuccess ? res : endRes) + ": " +
           ncclGetLastError(nullptr);
  }
  why = g.sync();
  if (!why.empty()) return "after the call: " + why;

  std::ostringstream problems;
  int reported = 0;
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = bufs[static_cast<size_t>(r)];
    b.host.assign(rn * esz, 0);
    if (download(b.host.data(), b.recvPtr, rn * esz, g.stream(r)) != cudaSuccess) return "download failed";
    why = g.sync();
    if (!why.empty()) return "download: " + why;
    size_t wrong = 0;
    for (size_t i = 0; i < rn; ++i) {
      const std::optional<double> want = expectedAt(c, n, r, i);
      if (!want) continue;
      const double got = loadValue(c.type, b.host.data(), i);
      if (got == *want) continue;  // NaN (the float poison) never compares equal
      if (++wrong <= 3 && reported < 8) {
        problems << "\n  rank " << r << " [" << i << "]: got " << got << ", want " << *want;
        ++reported;
      }
    }
    if (wrong > 0) problems << "\n  rank " << r << ": " << wrong << " of " << rn << " elements wrong";
    if (b.customOp) ncclRedOpDestroy(b.op, g.comm(r));
  }
  return problems.str();
}

// ---- fixtures ------------------------------------------------------------------------

class GpuApi : public ::testing::Test {
 protected:
  void SetUp() override {
    CHORUS_REQUIRE_GPU();
    chorusSetDefaultMode(chorusModeGpu);
  }
  void TearDown() override { chorusSetDefaultMode(chorusModeAuto); }
};

struct Topology {
  const char* name;
  std::vector<int> devices;
};

bool enoughDevices(const std::vector<int>& devices, std::string* why) {
  const int need = *std::max_element(devices.begin(), devices.end()) + 1;
  if (deviceCount() >= need) return true;
  *why = "needs " + std::to_string(need) + " GPUs, found " + std::to_string(deviceCount());
  return false;
}

// Readable parameters in test listings (gtest would print the bytes).
void PrintTo(const Topology& t, std::ostream* os) { *os << t.name; }
void PrintTo(Coll c, std::ostream* os) { *os << collName(c); }

using MatrixParam = std::tuple<Topology, Coll>;

class Matrix : public ::testing::TestWithParam<MatrixParam> {
 protected:
  void SetUp() override {
    CHORUS_REQUIRE_GPU();
    std::string why;
    if (!enoughDevices(std::get<0>(GetParam()).devices, &why)) GTEST_SKIP() << "GPU test skipped: " << why;
    chorusSetDefaultMode(chorusModeGpu);
  }
  void TearDown() override { chorusSetDefaultMode(chorusModeAuto); }
};

TEST_P(Matrix, EveryTypeOpAndCount) {
  const auto& [topo, coll] = GetParam();
  GpuRanks g(topo.devices);
  ASSERT_TRUE(g.error().empty()) << g.error();
  const int n = g.size();
  const std::vector<Op> ops = reduces(coll) ? kOps : std::vector<Op>{Op::None};
  int failures = 0;
  for (ncclDataType_t type : kTypes) {
    for (size_t count : countsFor(type)) {
      for (Op op : ops) {
        for (bool inPlace : {false, true}) {
          // In place once per type and count (with the first operator).
          if (inPlace && (!hasInPlace(coll) || op != ops.front())) continue;
          const Case c{coll, type, op, count, inPlace, n - 1};
          const std::string problems = runCase(g, c);
          if (problems.empty()) continue;
          ADD_FAILURE() << c.describe(n) << ": " << problems;
          // Aborted (after a hang) or broken communicators fail every later case the same way.
          ASSERT_TRUE(g.alive()) << "communicators aborted after that case; stopping";
          ASSERT_LT(++failures, 10) << "stopping after 10 failed cases";
        }
      }
    }
  }
}

const Topology kTwoOnDev0{"two_ranks_dev0", {0, 0}};
const Topology kFourOnDev0{"four_ranks_dev0", {0, 0, 0, 0}};
const Topology kDev0Dev1{"dev0_dev1", {0, 1}};

INSTANTIATE_TEST_SUITE_P(GpuCollectives, Matrix,
                         ::testing::Combine(::testing::Values(kTwoOnDev0, kFourOnDev0, kDev0Dev1),
                                            ::testing::Values(Coll::AllReduce, Coll::Broadcast, Coll::Reduce,
                                                              Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll,
                                                              Coll::Gather, Coll::Scatter, Coll::SendRecv)),
                         [](const ::testing::TestParamInfo<MatrixParam>& info) {
                           return std::string(std::get<0>(info.param).name) + "_" + collName(std::get<1>(info.param));
                         });

// ---- small helpers for the behavioural tests ----------------------------------------

// Float all-reduce buffers on every rank with inputs (rank-dependent, shifted
// by `salt`) already on the device.
struct SumBuffers {
  std::vector<DevMem> send, recv;
  size_t count;
  SumBuffers(GpuRanks& g, size_t count_, int salt = 0) : count(count_) {
    for (int r = 0; r < g.size(); ++r) {
      send.emplace_back(g.device(r), count * sizeof(float));
      recv.emplace_back(g.device(r), count * sizeof(float));
      fill(g, r, salt);
    }
  }
  static float input(int r, size_t i, int salt) {
    return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(r) * 13 + static_cast<size_t>(salt)) % 17) -
                              8);
  }
  void fill(GpuRanks& g, int r, int salt) {
    std::vector<float> h(count);
    for (size_t i = 0; i < count; ++i) h[i] = input(r, i, salt);
    cudaMemcpyAsync(send[static_cast<size_t>(r)].get(), h.data(), count * sizeof(float), cudaMemcpyHostToDevice,
                    g.stream(r));
    cudaMemsetAsync(recv[static_cast<size_t>(r)].get(), kPoisonByte, count * sizeof(float), g.stream(r));
    cudaStreamSynchronize(g.stream(r));
  }
  // "" when every rank's recv holds the sum (times `scale`) of the inputs.
  std::string check(GpuRanks& g, int salt, float scale = 1.0f, const std::vector<DevMem>* where = nullptr) {
    const std::vector<DevMem>& out = where ? *where : recv;
    std::vector<float> h(count);
    for (int r = 0; r < g.size(); ++r) {
      cudaMemcpy(h.data(), out[static_cast<size_t>(r)].get(), count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int q = 0; q < g.size(); ++q) want += input(q, i, salt);
        want *= scale;
        if (h[i] != want)
          return "rank " + std::to_string(r) + " [" + std::to_string(i) + "]: got " + std::to_string(h[i]) + ", want " +
                 std::to_string(want);
      }
    }
    return "";
  }
};

ncclResult_t allReduceAll(GpuRanks& g, SumBuffers& b) {
  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < g.size() && res == ncclSuccess; ++r)
    res = ncclAllReduce(b.send[static_cast<size_t>(r)].get(), b.recv[static_cast<size_t>(r)].get(), b.count,
                        ncclFloat32, ncclSum, g.comm(r), g.stream(r));
  const ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

// ---- calls enqueue and return ------------------------------------------------------------

// A host function that keeps its stream busy until the test opens the gate
// (or, as a safety net, 10 s pass: then the call under test had blocked).
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> timedOut{false};
};
void CUDART_CB holdStream(void* p) {
  auto* gate = static_cast<Gate*>(p);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gate->open.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      gate->timedOut.store(true);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_F(GpuApi, CallsReturnBeforeTheWorkIsDone) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, 1 << 20);
  // A first call sets up whatever connections the library makes lazily.
  ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");
  b.fill(g, 0, 1);
  b.fill(g, 1, 1);

  Gate gate;
  for (int r = 0; r < g.size(); ++r) CUDA_OK(cudaLaunchHostFunc(g.stream(r), holdStream, &gate));
  const auto t0 = std::chrono::steady_clock::now();
  const ncclResult_t res = allReduceAll(g, b);
  const auto ms = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0).count();
  const bool returnedWhileHeld = !gate.timedOut.load();
  std::vector<cudaError_t> pending;
  for (int r = 0; r < g.size(); ++r) pending.push_back(cudaStreamQuery(g.stream(r)));
  gate.open.store(true);
  ASSERT_EQ(res, ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_TRUE(returnedWhileHeld) << "the call waited for its stream (returned after " << ms << " ms)";
  EXPECT_LT(ms, 5000) << "the call took " << ms << " ms";
  for (int r = 0; r < g.size(); ++r)
    EXPECT_EQ(pending[static_cast<size_t>(r)], cudaErrorNotReady) << "rank " << r << "'s stream was already idle";
  ASSERT_EQ(g.sync(), "");
  EXPECT_EQ(b.check(g, 1), "");
}

// ---- CUDA graph capture ---------------------------------------------------------------------

TEST_F(GpuApi, GraphCaptureReplays) {
  for (const std::vector<int>& devices : {std::vector<int>{0, 0}, std::vector<int>{0, 0, 0, 0}}) {
    SCOPED_TRACE(std::to_string(devices.size()) + " ranks");
    GpuRanks g(devices);
    ASSERT_TRUE(g.error().empty()) << g.error();
    const int n = g.size();
    SumBuffers b(g, (1 << 18) + 3);
    SumBuffers twice(g, b.count);  // second output: all-reduce of the first one's result
    ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);  // lazy setup outside the capture
    ASSERT_EQ(g.sync(), "");

    for (int r = 0; r < n; ++r) CUDA_OK(cudaStreamBeginCapture(g.stream(r), cudaStreamCaptureModeThreadLocal));
    ncclResult_t res = allReduceAll(g, b);
    if (res == ncclSuccess) {
      ncclGroupStart();
      for (int r = 0; r < n; ++r)
        ncclAllReduce(b.recv[static_cast<size_t>(r)].get(), twice.recv[static_cast<size_t>(r)].get(), b.count,
                      ncclFloat32, ncclSum, g.comm(r), g.stream(r));
      res = ncclGroupEnd();
    }
    std::vector<cudaGraphExec_t> execs(static_cast<size_t>(n), nullptr);
    bool captured = true;
    for (int r = 0; r < n; ++r) {
      cudaGraph_t graph = nullptr;
      const cudaError_t e = cudaStreamEndCapture(g.stream(r), &graph);
      if (e != cudaSuccess) {
        ADD_FAILURE() << "rank " << r << ": cudaStreamEndCapture: " << cudaGetErrorString(e);
        captured = false;
        continue;
      }
      EXPECT_EQ(cudaGraphInstantiate(&execs[static_cast<size_t>(r)], graph, 0), cudaSuccess);
      cudaGraphDestroy(graph);
    }
    ASSERT_EQ(res, ncclSuccess) << "collectives during capture: " << ncclGetLastError(nullptr);
    ASSERT_TRUE(captured);

    for (int replay = 0; replay < 10; ++replay) {
      SCOPED_TRACE("replay " + std::to_string(replay));
      for (int r = 0; r < n; ++r) {
        b.fill(g, r, replay + 2);  // new inputs, poisoned outputs: the replay must redo the work
        cudaMemsetAsync(twice.recv[static_cast<size_t>(r)].get(), kPoisonByte, b.count * sizeof(float), g.stream(r));
      }
      for (int r = 0; r < n; ++r) CUDA_OK(cudaGraphLaunch(execs[static_cast<size_t>(r)], g.stream(r)));
      ASSERT_EQ(g.sync(), "");
      ASSERT_EQ(b.check(g, replay + 2), "");
      ASSERT_EQ(b.check(g, replay + 2, static_cast<float>(n), &twice.recv), "") << "(second, chained all-reduce)";
    }
    for (cudaGraphExec_t e : execs)
      if (e) cudaGraphExecDestroy(e);
  }
}

// ---- abort and timeout ---------------------------------------------------------------------

// Rank 0 starts an all-reduce that rank 1 never joins.
ncclResult_t startLonelyAllReduce(GpuRanks& g, SumBuffers& b) {
  return mustReturnWithin("ncclAllReduce on rank 0 whose peer never calls", Ms(5000), [&] {
    return ncclAllReduce(b.send[0].get(), b.recv[0].get(), b.count, ncclFloat32, ncclSum, g.comm(0), g.stream(0));
  });
}

TEST_F(GpuApi, AbortStopsARunningKernel) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, 1 << 20);
  ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");

  ASSERT_EQ(startLonelyAllReduce(g, b), ncclSuccess) << ncclGetLastError(g.comm(0));
  std::this_thread::sleep_for(Ms(100));
  ncclResult_t state = ncclInternalError;
  const ncclResult_t q = mustReturnWithin("ncclCommGetAsyncError while the kernel waits", Ms(5000),
                                          [&] { return ncclCommGetAsyncError(g.comm(0), &state); });
  EXPECT_EQ(q, ncclSuccess);
  EXPECT_TRUE(state == ncclSuccess || state == ncclInProgress) << "async state " << ncclGetErrorString(state);

  const auto t0 = std::chrono::steady_clock::now();
  ncclComm_t c0 = g.comm(0);
  cudaStream_t s0 = g.stream(0);
  EXPECT_EQ(mustReturnWithin("ncclCommAbort on rank 0", Ms(5000), [c0] { return ncclCommAbort(c0); }), ncclSuccess);
  g.forget(0);
  const cudaError_t synced =
      mustReturnWithin("cudaStreamSynchronize after the abort", Ms(5000), [s0] { return cudaStreamSynchronize(s0); });
  const auto ms = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(synced, cudaSuccess) << cudaGetErrorString(synced) << " (an abort must end the kernel cleanly)";
  EXPECT_LT(ms, 5000);
  g.markBroken();  // rank 1 is aborted too at teardown
}

TEST_F(GpuApi, StuckPeerTimesOutNamingThePeer) {
  EnvScope env(EnvScope::Vars{{"CHORUS_TIMEOUT_MS", "500"}});
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, 1 << 20);
  ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(startLonelyAllReduce(g, b), ncclSuccess) << ncclGetLastError(g.comm(0));
  ncclResult_t state = ncclSuccess;
  int64_t ms = 0;
  while (ms < 10000) {
    const ncclResult_t q =
        mustReturnWithin("ncclCommGetAsyncError", Ms(5000), [&] { return ncclCommGetAsyncError(g.comm(0), &state); });
    ASSERT_EQ(q, ncclSuccess);
    ms = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0).count();
    if (state != ncclSuccess && state != ncclInProgress) break;
    std::this_thread::sleep_for(Ms(10));
  }
  if (state == ncclSuccess || state == ncclInProgress) {
    g.abortAll();  // the kernel must not outlive the test's buffers
    FAIL() << "no error after " << ms << " ms (timeout 500 ms)";
  }
  g.markBroken();
  EXPECT_LT(ms, 5000) << "the 500 ms timeout took " << ms << " ms to surface";
  const std::string msg = ncclGetLastError(g.comm(0));
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << "the error does not name the peer: \"" << msg << "\"";
  cudaStream_t s0 = g.stream(0);
  EXPECT_EQ(
      mustReturnWithin("cudaStreamSynchronize after the timeout", Ms(5000), [s0] { return cudaStreamSynchronize(s0); }),
      cudaSuccess);
}

// ---- registration and allocation -------------------------------------------------------------

TEST_F(GpuApi, RegisteredBuffers) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, (1 << 20) + 5);
  std::vector<void*> handles;
  for (int r = 0; r < g.size(); ++r) {
    for (DevMem* m : {&b.send[static_cast<size_t>(r)], &b.recv[static_cast<size_t>(r)]}) {
      void* h = nullptr;
      ASSERT_EQ(ncclCommRegister(g.comm(r), m->get(), m->size(), &h), ncclSuccess) << ncclGetLastError(g.comm(r));
      handles.push_back(h);
    }
  }
  for (int round = 0; round < 3; ++round) {
    b.fill(g, 0, round);
    b.fill(g, 1, round);
    ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(g.sync(), "");
    EXPECT_EQ(b.check(g, round), "") << "round " << round;
  }
  for (int r = 0; r < g.size(); ++r)
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(ncclCommDeregister(g.comm(r), handles[static_cast<size_t>(r * 2 + k)]), ncclSuccess);
}

// Sends from registered buffers between ranks of one GPU go zero-copy (the
// receiver's kernel copies from the sender's buffer): a ring shift, where
// every rank sends its registered input to the next rank, must deliver the
// exact bytes, round after round, and still after deregistration.
TEST_F(GpuApi, RegisteredSendsRingShift) {
  GpuRanks g({0, 0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  const int n = g.size();
  SumBuffers b(g, (3 << 20) + 11);
  std::vector<void*> handles(static_cast<size_t>(n), nullptr);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommRegister(g.comm(r), b.send[static_cast<size_t>(r)].get(), b.send[static_cast<size_t>(r)].size(),
                               &handles[static_cast<size_t>(r)]),
              ncclSuccess)
        << ncclGetLastError(g.comm(r));
  for (int round = 0; round < 3; ++round) {
    if (round == 2) {
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(ncclCommDeregister(g.comm(r), handles[static_cast<size_t>(r)]), ncclSuccess);
      }
    }
    for (int r = 0; r < n; ++r) b.fill(g, r, round);
    ncclResult_t res = ncclGroupStart();
    for (int r = 0; r < n && res == ncclSuccess; ++r) {
      const size_t u = static_cast<size_t>(r);
      res = ncclSend(b.send[u].get(), b.count, ncclFloat32, (r + 1) % n, g.comm(r), g.stream(r));
      if (res == ncclSuccess)
        res = ncclRecv(b.recv[u].get(), b.count, ncclFloat32, (r + n - 1) % n, g.comm(r), g.stream(r));
    }
    const ncclResult_t end = ncclGroupEnd();
    ASSERT_EQ(res, ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(end, ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(g.sync(), "");
    std::vector<float> h(b.count);
    for (int r = 0; r < n; ++r) {
      const int from = (r + n - 1) % n;
      ASSERT_EQ(
          cudaMemcpy(h.data(), b.recv[static_cast<size_t>(r)].get(), b.count * sizeof(float), cudaMemcpyDeviceToHost),
          cudaSuccess);
      size_t bad = 0;
      for (size_t i = 0; i < b.count; ++i) bad += h[i] != SumBuffers::input(from, i, round);
      EXPECT_EQ(bad, 0u) << "round " << round << ": rank " << r << " received wrong data from rank " << from;
    }
  }
}

TEST_F(GpuApi, MemAllocAndWindows) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  const int n = g.size();
  const size_t count = (1 << 18) + 1;
  const size_t bytes = count * sizeof(float);
  std::vector<void*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(g.device(r)));
    ASSERT_EQ(ncclMemAlloc(&send[static_cast<size_t>(r)], bytes), ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(ncclMemAlloc(&recv[static_cast<size_t>(r)], bytes), ncclSuccess) << ncclGetLastError(nullptr);
    cudaPointerAttributes attr{};
    CUDA_OK(cudaPointerGetAttributes(&attr, send[static_cast<size_t>(r)]));
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice) << "ncclMemAlloc must return device memory in a CUDA build";
    EXPECT_EQ(attr.device, g.device(r));
  }
  auto runAndCheck = [&](int salt) -> std::string {
    std::vector<float> h(count);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) h[i] = SumBuffers::input(r, i, salt);
      cudaMemcpy(send[static_cast<size_t>(r)], h.data(), bytes, cudaMemcpyHostToDevice);
      cudaMemset(recv[static_cast<size_t>(r)], kPoisonByte, bytes);
    }
    cudaDeviceSynchronize();
    ncclGroupStart();
    for (int r = 0; r < n; ++r)
      ncclAllReduce(send[static_cast<size_t>(r)], recv[static_cast<size_t>(r)], count, ncclFloat32, ncclSum, g.comm(r),
                    g.stream(r));
    if (ncclGroupEnd() != ncclSuccess) return std::string("all-reduce failed: ") + ncclGetLastError(nullptr);
    std::string why = g.sync();
    if (!why.empty()) return why;
    for (int r = 0; r < n; ++r) {
      cudaMemcpy(h.data(), recv[static_cast<size_t>(r)], bytes, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += SumBuffers::input(q, i, salt);
        if (h[i] != want) return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
      }
    }
    return "";
  };
  EXPECT_EQ(runAndCheck(0), "") << "(ncclMemAlloc buffers)";

  // Windows are collective: one thread registers every rank's inside a group.
  std::vector<ncclWindow_t> sendWin(static_cast<size_t>(n)), recvWin(static_cast<size_t>(n));
  ncclGroupStart();
  ncclResult_t res = ncclSuccess;
  for (int r = 0; r < n; ++r) {
    const ncclResult_t a = ncclCommWindowRegister(g.comm(r), send[static_cast<size_t>(r)], bytes,
                                                  &sendWin[static_cast<size_t>(r)], NCCL_WIN_COLL_SYMMETRIC);
    const ncclResult_t c = ncclCommWindowRegister(g.comm(r), recv[static_cast<size_t>(r)], bytes,
                                                  &recvWin[static_cast<size_t>(r)], NCCL_WIN_COLL_SYMMETRIC);
    if (res == ncclSuccess) res = a != ncclSuccess ? a : c;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess && end == ncclSuccess) {
    EXPECT_EQ(runAndCheck(1), "") << "(buffers in symmetric windows)";
    ncclGroupStart();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(ncclCommWindowDeregister(g.comm(r), sendWin[static_cast<size_t>(r)]), ncclSuccess);
      EXPECT_EQ(ncclCommWindowDeregister(g.comm(r), recvWin[static_cast<size_t>(r)]), ncclSuccess);
    }
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  } else {
    std::printf("note: ncclCommWindowRegister in GPU mode: %s (%s); window part not run\n",
                ncclGetErrorString(res != ncclSuccess ? res : end), ncclGetLastError(nullptr));
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ncclMemFree(send[static_cast<size_t>(r)]), ncclSuccess);
    EXPECT_EQ(ncclMemFree(recv[static_cast<size_t>(r)]), ncclSuccess);
  }
}

// ---- identity ------------------------------------------------------------------------------------

TEST_F(GpuApi, DeviceModeAndVersion) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22809);
  std::vector<std::vector<int>> lists = {{0, 0}, {0, 0, 0}};
  if (deviceCount() >= 2) lists.push_back({1, 0});
  for (const std::vector<int>& devices : lists) {
    GpuRanks g(devices);
    ASSERT_TRUE(g.error().empty()) << g.error();
    for (int r = 0; r < g.size(); ++r) {
      int dev = -1;
      EXPECT_EQ(ncclCommCuDevice(g.comm(r), &dev), ncclSuccess);
      EXPECT_EQ(dev, g.device(r)) << "rank " << r;
      chorusMode_t mode = chorusModeAuto;
      EXPECT_EQ(chorusCommGetMode(g.comm(r), &mode), ncclSuccess);
      EXPECT_EQ(mode, chorusModeGpu);
    }
  }
  // Auto mode picks the GPU when one is visible (unless the environment says otherwise).
  const char* env = std::getenv("CHORUS_MODE");
  if (env == nullptr || std::string(env) == "auto" || std::string(env).empty()) {
    chorusSetDefaultMode(chorusModeAuto);
    GpuRanks g({0});
    ASSERT_TRUE(g.error().empty()) << g.error();
    chorusMode_t mode = chorusModeAuto;
    EXPECT_EQ(chorusCommGetMode(g.comm(0), &mode), ncclSuccess);
    EXPECT_EQ(mode, chorusModeGpu) << "CHORUS_MODE=auto with a GPU must choose GPU mode";
  }
}

}  // namespace
}  // namespace chorus::gputest
