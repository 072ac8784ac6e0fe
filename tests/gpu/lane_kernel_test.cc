// The lane kernel (kernels/colls/lane_kernel.cuh) on one GPU: lanes of one
// launch talk through connectors in device memory, with both protocols. A
// three-lane chain of Single segments (send -> recvReduceCopySend ->
// recvReduce) must produce exactly what the host reduction loops give for the
// same operand order, with few slots so they wrap many times; three lanes
// running one RingAllReduce segment each (the steps generated on the device)
// must all end with the sum. Aborts, timeouts and mismatched piece sizes must
// end the launch with the matching status instead of hanging.
#include <chrono>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include "gpu/gpu_test_util.h"
#include "host/host_reduce.h"
#include "kernels/launch.h"

namespace chorus {
namespace {

using gputest::DeviceBuffer;

// Device memory of one connector: counters, sizes and slots, plus the two
// ends' position counters.
struct FifoMemory {
  struct Control {
    uint64_t tail, head, sendPos, recvPos;
    uint32_t sizes[64];
  };
  DeviceBuffer control{sizeof(Control)};
  DeviceBuffer slots;
  uint32_t slotBytes, nslots;
  FifoMemory(uint32_t slotBytes_, uint32_t nslots_)
      : slots(size_t(slotBytes_) * nslots_), slotBytes(slotBytes_), nslots(nslots_) {}
  dev::DevFifo end(bool sender, int peer) const {
    auto* c = control.as<Control>();
    dev::DevFifo f;
    f.tail = &c->tail;
    f.head = &c->head;
    f.sizes = c->sizes;
    f.slots = slots.as<char>();
    f.slotBytes = slotBytes;
    f.nslots = nslots;
    f.position = sender ? &c->sendPos : &c->recvPos;
    f.peer = peer;
    return f;
  }
};

// Launches (the arrays travel as kernel parameters); returns the status record.
struct LaunchResult {
  cudaError_t launch;
  cudaError_t sync;
  dev::LaneStatusRecord status;
};

LaunchResult runLanes(dev::LaneLaunch L, const std::vector<dev::DevLane>& lanes,
                      const std::vector<sched::Segment>& segments, const std::vector<dev::DevFifo>& fifos,
                      volatile int32_t* abortFlag = nullptr, std::chrono::milliseconds abortAfter = {}) {
  DeviceBuffer dst(sizeof(dev::LaneStatusRecord));
  dev::LaneStatusRecord init;
  dst.upload(&init);
  L.lanes = lanes.data();
  L.nLanes = static_cast<int>(lanes.size());
  L.segments = segments.data();
  L.nSegments = static_cast<int>(segments.size());
  L.fifos = fifos.data();
  L.nFifos = static_cast<int>(fifos.size());
  L.status = dst.as<dev::LaneStatusRecord>();
  LaunchResult r{};
  r.launch = dev::launchLanes(L, nullptr);
  if (abortFlag != nullptr) {
    std::this_thread::sleep_for(abortAfter);
    *abortFlag = 1;
  }
  r.sync = cudaDeviceSynchronize();
  dst.download(&r.status);
  return r;
}

// A Single segment (one step) with at most one receive and one send
// connector (-1: none); src and dst may be null.
sched::Segment makeStep(int recv, int send, const void* src, void* dst, uint64_t count, bool preSrc, bool post,
                        bool direct = false) {
  sched::Segment s;
  if (recv >= 0) s.conn[0] = static_cast<int16_t>(recv);
  if (send >= 0) s.conn[2] = static_cast<int16_t>(send);
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.flags = static_cast<uint8_t>((src ? sched::kSegHasSrc : 0) | (dst ? sched::kSegHasDst : 0) |
                                 (preSrc ? sched::kSegPreSrc : 0) | (post ? sched::kSegPost : 0) |
                                 (direct ? sched::kSegDirect : 0));
  return s;
}

struct ChainCase {
  ncclDataType_t type;
  ReduceKind kind;
  dev::Protocol protocol;
};

void PrintTo(const ChainCase& c, std::ostream* os) {
  *os << "type " << c.type << " kind " << int(c.kind) << (c.protocol == dev::Protocol::LL ? " LL" : " Simple");
}

class LaneChain : public ::testing::TestWithParam<ChainCase> {
 protected:
  void SetUp() override { CHORUS_REQUIRE_GPU(); }
};

TEST_P(LaneChain, MatchesHostReductionOrder) {
  const auto [type, kind, protocol] = GetParam();
  if (!dev::kernelCompiled(type, kind)) GTEST_SKIP() << "filtered out of this build: " << dev::kernelFilter();
  const size_t esz = typeSize(type), n = 100003, bytes = n * esz;
  std::mt19937 rng(7);
  std::vector<float> pool(3 * n);
  for (auto& x : pool) x = float(int(rng() % 17) - 8);  // exact in every float type
  auto make = [&](int which) {
    std::vector<uint8_t> v(bytes);
    // Small integers are exact in every type tested here.
    for (size_t i = 0; i < n; ++i) {
      const float f = pool[which * n + i];
      switch (type) {
        case ncclFloat32:
          std::memcpy(&v[i * 4], &f, 4);
          break;
        case ncclInt32: {
          int32_t x = int32_t(f);
          std::memcpy(&v[i * 4], &x, 4);
          break;
        }
        case ncclBfloat16: {
          uint32_t u;
          std::memcpy(&u, &f, 4);
          uint16_t h = uint16_t(u >> 16);
          std::memcpy(&v[i * 2], &h, 2);
          break;
        }
        default:
          break;
      }
    }
    return v;
  };
  auto A = make(0), B = make(1), C = make(2);
  const float two = 2.0f;
  std::vector<uint8_t> scalar(esz);
  if (type == ncclFloat32) std::memcpy(scalar.data(), &two, 4);
  if (type == ncclInt32) {
    int32_t x = 2;
    std::memcpy(scalar.data(), &x, 4);
  }
  if (type == ncclBfloat16) {
    uint16_t h = 0x4000;
    std::memcpy(scalar.data(), &h, 2);
  }

  DeviceBuffer dA(bytes), dB(bytes), dC(bytes), dOut1(bytes), dOut2(bytes), dScalar(esz);
  ASSERT_TRUE(dA.upload(A.data()) && dB.upload(B.data()) && dC.upload(C.data()) && dScalar.upload(scalar.data()));

  const uint32_t slotBytes = protocol == dev::Protocol::LL ? 2 * 4096 : 64 * 1024;
  const uint32_t piece = protocol == dev::Protocol::LL ? 4096 : slotBytes;
  FifoMemory f01(slotBytes, 2), f12(slotBytes, 2);
  std::vector<dev::DevFifo> fifos = {f01.end(true, 1), f01.end(false, 0), f12.end(true, 2), f12.end(false, 1)};
  const bool pre = kind == ReduceKind::PreMulSum, post = kind == ReduceKind::SumPostDiv;
  std::vector<sched::Segment> steps = {
      makeStep(-1, 0, dA.get(), nullptr, n, pre, false),      // send A
      makeStep(1, 2, dB.get(), dOut1.get(), n, pre, false),   // recv, reduce B, copy out, send
      makeStep(3, -1, dC.get(), dOut2.get(), n, pre, post)};  // recv, reduce C, out
  std::vector<dev::DevLane> lanes(3);
  for (uint32_t i = 0; i < 3; ++i) lanes[i] = {i, 1, piece, protocol};

  dev::LaneLaunch L;
  L.type = type;
  L.kind = kind;
  L.scalar = dScalar.get();
  L.divisor = 3;
  L.timeoutNs = 20ull * 1000 * 1000 * 1000;
  const LaunchResult r = runLanes(L, lanes, steps, fifos);
  ASSERT_EQ(r.launch, cudaSuccess);
  ASSERT_EQ(r.sync, cudaSuccess);
  ASSERT_EQ(r.status.status, 0) << "lane " << r.status.lane << " peer " << r.status.peer;

  // The host's order: lane 0 sends pre(A); lane 1: r (+) pre(B); lane 2: post(r (+) pre(C)).
  ReduceSpec spec{type, kind, scalar.data(), 3};
  std::vector<uint8_t> sent(bytes), want1(bytes), want2(bytes), got1(bytes), got2(bytes);
  host::transform(spec, sent.data(), A.data(), pre, n, false);
  host::reduce(spec, want1.data(), sent.data(), false, B.data(), pre, n, false);
  host::reduce(spec, want2.data(), want1.data(), false, C.data(), pre, n, post);
  ASSERT_TRUE(dOut1.download(got1.data()) && dOut2.download(got2.data()));
  EXPECT_EQ(std::memcmp(got1.data(), want1.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(got2.data(), want2.data(), bytes), 0);
}

INSTANTIATE_TEST_SUITE_P(Protocols, LaneChain,
                         ::testing::Values(ChainCase{ncclFloat32, ReduceKind::Sum, dev::Protocol::Simple},
                                           ChainCase{ncclFloat32, ReduceKind::Sum, dev::Protocol::LL},
                                           ChainCase{ncclBfloat16, ReduceKind::Sum, dev::Protocol::Simple},
                                           ChainCase{ncclBfloat16, ReduceKind::PreMulSum, dev::Protocol::LL},
                                           ChainCase{ncclFloat32, ReduceKind::SumPostDiv, dev::Protocol::Simple},
                                           ChainCase{ncclInt32, ReduceKind::SumPostDiv, dev::Protocol::LL}),
                         [](const auto& info) {
                           return "t" + std::to_string(info.param.type) + "_k" + std::to_string(int(info.param.kind)) +
                                  (info.param.protocol == dev::Protocol::LL ? "_LL" : "_Simple");
                         });

// Three lanes as the three ranks of a ring, each running one RingAllReduce
// segment whose steps the kernel generates (src/sched/segment.h): rounds of
// chunks that fit half a FIFO, so every lane ends with the sum of all inputs.
// Small integers: the sum is exact in any order.
class LaneRing : public ::testing::TestWithParam<dev::Protocol> {
 protected:
  void SetUp() override {
    CHORUS_REQUIRE_GPU();
    if (!dev::kernelCompiled(ncclFloat32, ReduceKind::Sum)) GTEST_SKIP() << "f32:sum filtered out";
  }
};

TEST_P(LaneRing, EveryLaneEndsWithTheSum) {
  constexpr int kRanks = 3;
  constexpr uint32_t kSlots = 4;
  const dev::Protocol protocol = GetParam();
  const bool ll = protocol == dev::Protocol::LL;
  const uint32_t slotBytes = ll ? 8192 : 64 * 1024, piece = ll ? dev::llPayloadBytes(slotBytes) : slotBytes;
  const uint64_t n = 300001, chunk = piece / sizeof(float) * (kSlots / 2);  // several rounds, ragged
  std::vector<std::vector<float>> inputs(kRanks, std::vector<float>(n));
  std::vector<float> want(n, 0.0f);
  for (int r = 0; r < kRanks; ++r)
    for (uint64_t i = 0; i < n; ++i) {
      inputs[r][i] = float(int((i * 7 + uint64_t(r) * 13) % 17) - 8);
      want[i] += inputs[r][i];
    }
  std::vector<std::unique_ptr<DeviceBuffer>> in, out;
  std::vector<std::unique_ptr<FifoMemory>> links;  // link r: lane r -> lane r+1
  std::vector<dev::DevFifo> fifos;                 // 2r: link r's send end, 2r+1: its receive end
  for (int r = 0; r < kRanks; ++r) {
    in.push_back(std::make_unique<DeviceBuffer>(n * sizeof(float)));
    out.push_back(std::make_unique<DeviceBuffer>(n * sizeof(float)));
    ASSERT_TRUE(in.back()->upload(inputs[r].data()));
    links.push_back(std::make_unique<FifoMemory>(slotBytes, kSlots));
    fifos.push_back(links.back()->end(true, (r + 1) % kRanks));
    fifos.push_back(links.back()->end(false, r));
  }
  std::vector<sched::Segment> segments(kRanks);
  std::vector<dev::DevLane> lanes(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    sched::Segment& s = segments[r];
    s.kind = sched::SegmentKind::RingAllReduce;
    s.src = in[r]->get();
    s.dst = out[r]->get();
    s.count = n;
    s.roundElems = chunk * kRanks;
    s.nranks = kRanks;
    s.pos = r;
    s.conn[0] = static_cast<int16_t>(2 * ((r + kRanks - 1) % kRanks) + 1);
    s.conn[1] = static_cast<int16_t>(2 * r);
    lanes[r] = {uint32_t(r), 1, piece, protocol};
  }
  dev::LaneLaunch L;
  L.type = ncclFloat32;
  L.kind = ReduceKind::Sum;
  L.timeoutNs = 20ull * 1000 * 1000 * 1000;
  const LaunchResult res = runLanes(L, lanes, segments, fifos);
  ASSERT_EQ(res.launch, cudaSuccess);
  ASSERT_EQ(res.sync, cudaSuccess);
  ASSERT_EQ(res.status.status, 0) << "lane " << res.status.lane << " peer " << res.status.peer;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> got(n);
    ASSERT_TRUE(out[r]->download(got.data()));
    EXPECT_EQ(got, want) << "lane " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Protocols, LaneRing, ::testing::Values(dev::Protocol::Simple, dev::Protocol::LL),
                         [](const auto& info) { return info.param == dev::Protocol::LL ? "LL" : "Simple"; });

// A receiver whose sender never comes: the launch must end on the abort
// flag (set from the host while the kernel spins) or on the timeout.
class LaneFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    CHORUS_REQUIRE_GPU();
    if (!dev::kernelCompiled(ncclFloat32, ReduceKind::Sum)) GTEST_SKIP() << "f32:sum filtered out";
  }
  FifoMemory fifo{64 * 1024, 2};
  DeviceBuffer out{4096};
  std::vector<sched::Segment> lonelyReceiver(dev::Protocol) {
    return {makeStep(0, -1, nullptr, out.get(), 1024, false, false)};
  }
  // Lane 0 sends 10 floats (as pieces, or zero-copy), lane 1 expects 1024
  // from rank 4 (with LL: one 4 KiB piece, whose 1024 lines the sender
  // never writes beyond the tenth).
  LaunchResult sendTenExpectMore(bool zeroCopy, dev::Protocol proto = dev::Protocol::Simple) {
    DeviceBuffer in(4096);
    std::vector<dev::DevFifo> fifos = {fifo.end(true, 1), fifo.end(false, 4)};
    std::vector<sched::Segment> steps = {makeStep(-1, 0, in.get(), nullptr, 10, false, false, zeroCopy),
                                         makeStep(1, -1, nullptr, out.get(), 1024, false, false)};
    dev::LaneLaunch L;
    L.timeoutNs = 300ull * 1000 * 1000;  // a zero-copy sender then waits for its reader until this timeout
    const uint32_t piece = proto == dev::Protocol::LL ? dev::kLLMaxPieceBytes : 64 * 1024;
    return runLanes(L, {{0, 1, piece, proto}, {1, 1, piece, proto}}, steps, fifos);
  }
};

TEST_F(LaneFailure, AbortFlagStopsASpinningKernel) {
  for (auto proto : {dev::Protocol::Simple, dev::Protocol::LL}) {
    int32_t* flag = nullptr;
    ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int32_t), cudaHostAllocMapped), cudaSuccess);
    *flag = 0;
    int32_t* devFlag = nullptr;
    ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&devFlag), flag, 0), cudaSuccess);
    dev::LaneLaunch L;
    L.abortFlag = devFlag;
    const auto t0 = std::chrono::steady_clock::now();
    const LaunchResult r = runLanes(L, {{0, 1, 4096, proto}}, lonelyReceiver(proto), {fifo.end(false, 5)}, flag,
                                    std::chrono::milliseconds(200));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.sync, cudaSuccess);
    EXPECT_EQ(r.status.status, int(dev::LaneStatus::Aborted));
    EXPECT_EQ(r.status.peer, 5);
    EXPECT_LT(s, 5.0);
    cudaFreeHost(flag);
  }
}

TEST_F(LaneFailure, TimeoutStopsAStuckKernel) {
  dev::LaneLaunch L;
  L.timeoutNs = 100ull * 1000 * 1000;
  const LaunchResult r =
      runLanes(L, {{0, 1, 4096, dev::Protocol::Simple}}, lonelyReceiver(dev::Protocol::Simple), {fifo.end(false, 3)});
  EXPECT_EQ(r.sync, cudaSuccess);
  EXPECT_EQ(r.status.status, int(dev::LaneStatus::TimedOut));
  EXPECT_EQ(r.status.peer, 3);
}

TEST_F(LaneFailure, MismatchedPieceSizeIsReported) {
  // Lane 0 sends 10 floats, lane 1 expects 1024: the first piece's size differs.
  const LaunchResult r = sendTenExpectMore(false);
  EXPECT_EQ(r.sync, cudaSuccess);
  EXPECT_EQ(r.status.status, int(dev::LaneStatus::SizeMismatch));
  EXPECT_EQ(r.status.peer, 4);
  EXPECT_EQ(r.status.detail, 40u);
}

TEST_F(LaneFailure, MismatchedLLPieceSizeIsReportedNotWaitedOn) {
  // LL lines carry no size: the receiver learns the sender's from the slot's
  // sizes[] entry once it saw the first line, instead of spinning on lines
  // 10..1023 until the timeout.
  const LaunchResult r = sendTenExpectMore(false, dev::Protocol::LL);
  EXPECT_EQ(r.sync, cudaSuccess);
  EXPECT_EQ(r.status.status, int(dev::LaneStatus::SizeMismatch));
  EXPECT_EQ(r.status.peer, 4);
  EXPECT_EQ(r.status.detail, 40u);
  EXPECT_EQ(r.status.expected, 4096u);
}

// Zero-copy sends (kernels/common/direct_slot.h): a direct step posts one
// descriptor; the plain receive copies the whole step from the sender's
// buffer; a plain piece after it on the same connector still matches; and a
// descriptor of the wrong size is a DescriptorMismatch (WrongSize) naming
// the sender, as in the host executor.
TEST_F(LaneFailure, ZeroCopySendThenAPlainPieceOnOneConnector) {
  const size_t n = 300001, bytes = n * sizeof(float);  // > 4 slots of 64 KiB: a FIFO copy would wrap
  std::vector<float> a(n), b(64);
  for (size_t i = 0; i < n; ++i) a[i] = float(i % 1013) - 500.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i) + 0.25f;
  DeviceBuffer dA(bytes), dB(b.size() * 4), dOutA(bytes), dOutB(b.size() * 4);
  ASSERT_TRUE(dA.upload(a.data()) && dB.upload(b.data()));
  std::vector<dev::DevFifo> fifos = {fifo.end(true, 1), fifo.end(false, 0)};
  std::vector<sched::Segment> steps = {makeStep(-1, 0, dA.get(), nullptr, n, false, false, /*direct=*/true),
                                       makeStep(-1, 0, dB.get(), nullptr, b.size(), false, false),
                                       makeStep(1, -1, nullptr, dOutA.get(), n, false, false),
                                       makeStep(1, -1, nullptr, dOutB.get(), b.size(), false, false)};
  dev::LaneLaunch L;
  L.timeoutNs = 10ull * 1000 * 1000 * 1000;
  const LaunchResult r =
      runLanes(L, {{0, 2, 64 * 1024, dev::Protocol::Simple}, {2, 2, 64 * 1024, dev::Protocol::Simple}}, steps, fifos);
  ASSERT_EQ(r.sync, cudaSuccess);
  ASSERT_EQ(r.status.status, 0) << "lane " << r.status.lane << " peer " << r.status.peer;
  std::vector<float> gotA(n), gotB(b.size());
  ASSERT_TRUE(dOutA.download(gotA.data()) && dOutB.download(gotB.data()));
  EXPECT_EQ(gotA, a);
  EXPECT_EQ(gotB, b);
  FifoMemory::Control c;
  ASSERT_EQ(cudaMemcpy(&c, fifo.control.get(), sizeof(c), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(c.tail, 2u) << "one descriptor and one piece";
  EXPECT_EQ(c.head, 2u);
}

TEST_F(LaneFailure, ZeroCopyDescriptorOfTheWrongSizeIsReported) {
  const LaunchResult r = sendTenExpectMore(true);
  EXPECT_EQ(r.sync, cudaSuccess);
  EXPECT_EQ(r.status.status, int(dev::LaneStatus::DescriptorMismatch));
  EXPECT_EQ(r.status.peer, 4);
  EXPECT_EQ(r.status.detail, uint32_t(step::DescriptorCheck::WrongSize));
  EXPECT_EQ(r.status.received, 40u) << "the bytes the descriptor announced";
}

// The kernel trusts every index in its parameters: packLaneParams refuses
// what would make it read or write out of bounds, or a segment whose steps
// the kernel cannot run. Host-only: runs everywhere.
class LaneParamsChecks : public ::testing::Test {
 protected:
  uint64_t counters[3] = {};
  uint32_t sizes[4] = {};
  char slots[4096] = {};
  dev::DevFifo fifo;
  sched::Segment seg;
  dev::DevLane lane{0, 1, 1024, dev::Protocol::Simple};
  int32_t ring[4] = {0, 1, 2, 3};
  dev::LaneLaunch L;
  dev::LaneParams params;
  float out[256] = {};
  void SetUp() override {
    fifo.tail = &counters[0];
    fifo.head = &counters[1];
    fifo.position = &counters[2];
    fifo.sizes = sizes;
    fifo.slots = slots;
    fifo.slotBytes = 1024;
    fifo.nslots = 4;
    seg = makeStep(0, -1, nullptr, out, 256, false, false);  // a plain receive into out
    L.lanes = &lane;
    L.nLanes = 1;
    L.segments = &seg;
    L.nSegments = 1;
    L.fifos = &fifo;
    L.nFifos = 1;
  }
  cudaError_t pack() { return dev::packLaneParams(L, sizeof(float), &params); }
  // A ring all-reduce segment at position 1 of 4 over the one fifo (both directions).
  sched::Segment ringSegment() {
    sched::Segment s;
    s.kind = sched::SegmentKind::RingAllReduce;
    s.src = out;
    s.dst = out;
    s.count = 256;
    s.roundElems = 64;
    s.nranks = 4;
    s.pos = 1;
    s.conn[0] = 0;
    s.conn[1] = 0;
    return s;
  }
};

TEST_F(LaneParamsChecks, AValidLaunchIsCopiedIntoTheParameters) {
  ASSERT_EQ(pack(), cudaSuccess);
  EXPECT_EQ(params.L.nLanes, 1);
  EXPECT_EQ(params.L.lanes, nullptr) << "host pointers must not reach the kernel";
  EXPECT_EQ(params.L.segments, nullptr);
  EXPECT_EQ(params.L.fifos, nullptr);
  EXPECT_EQ(params.segments[0].dst, static_cast<void*>(out));
  EXPECT_EQ(params.segments[0].count, 256u);
  EXPECT_EQ(params.fifos[0].slots, slots);
  EXPECT_EQ(params.lanes[0].pieceBytes, 1024u);
}

TEST_F(LaneParamsChecks, BadThreadCountsAreRefused) {
  for (int threads : {0, 100, 1024, -32}) {
    L.threads = threads;
    EXPECT_EQ(pack(), cudaErrorInvalidValue) << threads;
  }
}

TEST_F(LaneParamsChecks, IndicesOutsideTheArraysAreRefused) {
  seg.conn[0] = 1;  // only one fifo
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.conn[0] = 0;
  lane.nSegments = 2;  // past the segment array
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  lane.nSegments = 1;
  lane.firstSegment = 1;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  lane.firstSegment = 0;
  L.nLanes = dev::kLaunchMaxLanes + 1;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.nLanes = 1;
  L.nSegments = dev::kLaunchMaxSegments + 1;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.nSegments = 1;
  ASSERT_EQ(pack(), cudaSuccess);
}

TEST_F(LaneParamsChecks, RingSegmentsMustStayInsideTheirRingAndRankTable) {
  seg = ringSegment();
  ASSERT_EQ(pack(), cudaSuccess);
  seg.pos = 4;  // not a position of a 4-rank ring
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.pos = 1;
  seg.roundElems = 0;  // no rounds: the step count would divide by zero
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.roundElems = 64;
  seg.conn[1] = sched::kNoConn;  // a ring step sends
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.conn[1] = 0;
  seg.kind = sched::SegmentKind::RingGather;
  seg.blockElems = 256;
  seg.ringTable = 0;  // no rank table in the launch
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.rankTable = ring;
  L.nRankTable = 3;  // one entry short of the ring
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.nRankTable = 4;
  ASSERT_EQ(pack(), cudaSuccess);
  EXPECT_EQ(params.rankTable[3], 3);
}

TEST_F(LaneParamsChecks, SingleSegmentsNeedAnOutputAndPackedConnectors) {
  seg.flags = 0;  // neither a local output nor a send: nowhere for the result
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.flags = sched::kSegHasDst;
  seg.conn[1] = seg.conn[0];
  seg.conn[0] = sched::kNoConn;  // second receive without a first
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.conn[0] = 0;
  seg.conn[1] = sched::kNoConn;
  seg.conn[3] = 0;  // second send without a first
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.conn[3] = sched::kNoConn;
  EXPECT_EQ(pack(), cudaSuccess);
}

TEST_F(LaneParamsChecks, OversizedLLPiecesAndMissingCountersAreRefused) {
  lane.protocol = dev::Protocol::LL;
  lane.pieceBytes = dev::kLLMaxPieceBytes + 4;  // would overrun the shared-memory stage
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  lane.pieceBytes = 512;
  EXPECT_EQ(pack(), cudaSuccess);
  fifo.position = nullptr;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
}

TEST_F(LaneParamsChecks, ZeroCopyOnlyOnPlainSendsOfSimpleLanes) {
  float in[256] = {};
  seg = makeStep(-1, 0, in, nullptr, 256, false, false, /*direct=*/true);
  EXPECT_EQ(pack(), cudaSuccess);
  seg.flags |= sched::kSegPreSrc;  // a zero-copy step cannot scale its input
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.flags &= static_cast<uint8_t>(~sched::kSegPreSrc);
  seg.conn[0] = 0;  // nor receive
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.conn[0] = sched::kNoConn;
  seg.dst = out;
  seg.flags |= sched::kSegHasDst;  // nor keep a local copy
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.dst = nullptr;
  seg.flags &= static_cast<uint8_t>(~sched::kSegHasDst);
  ASSERT_EQ(pack(), cudaSuccess);
  lane.protocol = dev::Protocol::LL;
  lane.pieceBytes = 512;  // its lines fit the slot: only the zero-copy flag is wrong
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.flags &= static_cast<uint8_t>(~sched::kSegDirect);
  EXPECT_EQ(pack(), cudaSuccess);
}

// The kernel writes a whole piece (an LL piece's lines: twice its bytes)
// into one slot of every connector its steps name.
TEST_F(LaneParamsChecks, PiecesLargerThanTheirSlotsAreRefused) {
  lane.pieceBytes = 1024 + 4;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  lane.pieceBytes = 1024;
  ASSERT_EQ(pack(), cudaSuccess);
  lane.protocol = dev::Protocol::LL;
  EXPECT_EQ(pack(), cudaErrorInvalidValue) << "1024 bytes of LL lines need a 2048-byte slot";
  lane.pieceBytes = 512;
  EXPECT_EQ(pack(), cudaSuccess);
}

// sizes[] and the slots' fingerprints hold kMaxFifoSlots entries.
TEST_F(LaneParamsChecks, FifosWithMoreSlotsThanTheirRecordsHoldAreRefused) {
  fifo.nslots = kMaxFifoSlots + 1;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  fifo.nslots = kMaxFifoSlots;
  EXPECT_EQ(pack(), cudaSuccess);
}

// Ring segments read their input and write their output at offsets the
// kernel computes: a missing buffer would become a wild pointer.
TEST_F(LaneParamsChecks, RingSegmentsNeedBothBuffers) {
  seg = ringSegment();
  ASSERT_EQ(pack(), cudaSuccess);
  seg.src = nullptr;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.src = out;
  seg.dst = nullptr;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.count = 0;
  EXPECT_EQ(pack(), cudaSuccess) << "an empty segment touches no buffer";
}

}  // namespace
}  // namespace chorus
