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
// The behavioural tests (enqueue, graphs, abort, registration, identity) are
// in gpu_api_behaviour_test.cc.
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

}  // namespace
}  // namespace chorus::gputest
