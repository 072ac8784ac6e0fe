// packLaneParams on wire launches (kernels/colls/lane_params.cc): the wire
// kernel trusts the connectors and rank tables of its segments, so a launch
// is refused when a wire segment lands in a lane-kernel launch or the other
// way round, when a table runs past the launch's or names a fifo that does
// not exist, when a combine that must send has no output, and when a
// compressed format meets a type or reduction it does not serve.
// Host-only: runs everywhere.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/launch.h"

namespace chorus {
namespace {

class WireParamsChecks : public ::testing::Test {
 protected:
  uint64_t counters[2][3] = {};
  uint32_t sizes[2][4] = {};
  char slots[2][8192] = {};
  dev::DevFifo fifos[2];
  // An owner of 3 ranks at position 1: rank 0's contribution on fifo 0, the
  // result to rank 2 on fifo 1, no partials.
  int32_t table[9] = {0, sched::kNoConn, sched::kNoConn, sched::kNoConn, sched::kNoConn, 1, 0, 0, 0};
  sched::Segment seg;
  dev::DevLane lane{0, 1, 8192, dev::Protocol::Simple};
  dev::LaneLaunch L;
  dev::LaneParams params;
  float in[1024] = {}, out[1024] = {};

  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      fifos[i].tail = &counters[i][0];
      fifos[i].head = &counters[i][1];
      fifos[i].position = &counters[i][2];
      fifos[i].sizes = sizes[i];
      fifos[i].slots = slots[i];
      fifos[i].slotBytes = 8192;
      fifos[i].nslots = 4;
    }
    seg.kind = sched::SegmentKind::WireOwner;
    seg.src = in;
    seg.dst = out;
    seg.count = 1024;
    seg.roundElems = 512;
    seg.nranks = 3;
    seg.pos = 1;
    seg.conn[0] = 0;
    seg.conn[1] = 1;
    seg.ringTable = 0;
    L.lanes = &lane;
    L.nLanes = 1;
    L.segments = &seg;
    L.nSegments = 1;
    L.fifos = fifos;
    L.nFifos = 2;
    L.rankTable = table;
    L.nRankTable = 9;
    L.wire = true;
    L.wireFormat = 3;  // int8
  }
  cudaError_t pack() { return dev::packLaneParams(L, sizeof(float), &params); }
};

TEST_F(WireParamsChecks, AValidOwnerIsCopiedWithItsTableAndFormat) {
  ASSERT_EQ(pack(), cudaSuccess);
  EXPECT_TRUE(params.L.wire);
  EXPECT_EQ(params.L.wireFormat, 3);
  EXPECT_EQ(params.L.rankTable, nullptr) << "host pointers must not reach the kernel";
  EXPECT_EQ(params.rankTable[5], 1);
  EXPECT_EQ(params.segments[0].kind, sched::SegmentKind::WireOwner);
}

TEST_F(WireParamsChecks, WireAndLaneSegmentsNeverShareAKernel) {
  L.wire = false;
  L.wireFormat = 0;
  EXPECT_EQ(pack(), cudaErrorInvalidValue) << "the lane kernel cannot run a wire segment";
  L.wire = true;
  seg = sched::Segment{};
  seg.src = in;
  seg.dst = out;
  seg.count = 16;
  seg.flags = static_cast<uint8_t>(sched::kSegHasSrc | sched::kSegHasDst);
  EXPECT_EQ(pack(), cudaErrorInvalidValue) << "the wire kernel cannot run a plain step";
}

TEST_F(WireParamsChecks, TablesOutOfRangeOrNamingNoFifoAreRefused) {
  L.nRankTable = 8;  // the owner's table needs 3 x 3 entries
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.nRankTable = 9;
  table[0] = 2;  // only fifos 0 and 1 exist
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  table[0] = 0;
  table[5] = -7;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  table[5] = 1;
  seg.pos = 3;  // past the ranks
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.pos = 1;
  seg.nranks = dev::kWireMaxRanks + 1;  // the owner's table would not fit the launch's either
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.nranks = 3;
  seg.roundElems = 0;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.roundElems = 512;
  ASSERT_EQ(pack(), cudaSuccess);
}

TEST_F(WireParamsChecks, MoreRanksThanTheKernelsTablesHoldAreRefused) {
  // A sender uses no rank table, so only the rank bound (the kernel's shared
  // tables hold kWireMaxRanks entries) can refuse it.
  seg.kind = sched::SegmentKind::WireSend;
  seg.ringTable = -1;
  seg.nranks = dev::kWireMaxRanks;
  ASSERT_EQ(pack(), cudaSuccess);
  seg.nranks = dev::kWireMaxRanks + 1;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
}

TEST_F(WireParamsChecks, ACombineThatMustSendNeedsAnOutput) {
  seg.kind = sched::SegmentKind::WireHostSum;
  ASSERT_EQ(pack(), cudaSuccess);
  table[5] = sched::kNoConn;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.kind = sched::SegmentKind::WireOwner;  // an owner without gatherers (Reduce, ReduceScatter) is fine
  EXPECT_EQ(pack(), cudaSuccess);
}

TEST_F(WireParamsChecks, SendersAndGatherersNeedTheirConnectorAndBuffer) {
  seg.kind = sched::SegmentKind::WireSend;
  seg.ringTable = -1;
  ASSERT_EQ(pack(), cudaSuccess);
  seg.conn[1] = sched::kNoConn;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  seg.kind = sched::SegmentKind::WireGather;
  ASSERT_EQ(pack(), cudaSuccess);
  seg.dst = nullptr;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
}

TEST_F(WireParamsChecks, CompressedFormatsServeFloatSumsOnly) {
  L.type = ncclInt32;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.wireFormat = 0;  // deterministic mode serves every type
  EXPECT_EQ(pack(), cudaSuccess);
  L.type = ncclBfloat16;
  L.kind = ReduceKind::Max;
  L.wireFormat = 2;
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
  L.kind = ReduceKind::SumPostDiv;
  EXPECT_EQ(pack(), cudaSuccess);
  L.wireFormat = 4;  // no such format
  EXPECT_EQ(pack(), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace chorus
