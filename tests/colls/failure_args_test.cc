// Bad arguments: each call must fail fast with the documented code and a
// message (ncclGetLastError) that names the problem, and must leave the
// communicator usable — the same ranks then run a collective correctly and
// ncclCommGetAsyncError still reports ncclSuccess.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/coll_cases.h"
#include "common/rank_runner.h"

namespace chorus::test {
namespace {

// Records a failure unless `res` is `want` and the last error mentions `needle`.
void expectError(RankCtx& ctx, ncclResult_t res, ncclResult_t want, const char* needle, const char* what) {
  const std::string msg = ncclGetLastError(nullptr);
  if (res != want) {
    ctx.fail("rank %d: %s returned %s, expected %s (last error: %s)", ctx.rank, what, ncclGetErrorString(res),
             ncclGetErrorString(want), msg.c_str());
    return;
  }
  if (msg.find(needle) == std::string::npos)
    ctx.fail("rank %d: %s: last error \"%s\" does not mention \"%s\"", ctx.rank, what, msg.c_str(), needle);
}

void expectUsable(RankCtx& ctx) {
  ncclResult_t async = ncclInternalError;
  RANK_OK(ctx, ncclCommGetAsyncError(ctx.comm, &async));
  if (async != ncclSuccess)
    ctx.fail("rank %d: argument errors must not poison the communicator (async error %s)", ctx.rank,
             ncclGetErrorString(async));
  Case c;
  c.coll = Coll::AllReduce;
  c.type = ncclFloat32;
  c.count = 1001;
  runCase(ctx, c);
  c.coll = Coll::Broadcast;
  c.root = ctx.nranks - 1;
  runCase(ctx, c);
}

// Every rank makes the same bad calls (none of them communicates), then a good one.
void badCollectiveArgs(RankCtx& ctx) {
  const int n = ctx.nranks;
  std::vector<float> a(64, 1.0f), b(64 * static_cast<size_t>(n), 0.0f);
  ncclComm_t comm = ctx.comm;
  expectError(ctx,
              ncclAllReduce(a.data(), b.data(), 4, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, comm, nullptr),
              ncclInvalidArgument, "datatype", "AllReduce with datatype ncclNumTypes");
  // 15: invalid but inside the enum's value range (casting -1 would be UB in C++ itself).
  expectError(ctx, ncclAllGather(a.data(), b.data(), 4, static_cast<ncclDataType_t>(15), comm, nullptr),
              ncclInvalidArgument, "datatype", "AllGather with datatype 15");
  expectError(ctx, ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, static_cast<ncclRedOp_t>(77), comm, nullptr),
              ncclInvalidArgument, "operator", "AllReduce with op 77");
  expectError(ctx,
              ncclReduce(a.data(), b.data(), 4, ncclFloat32, static_cast<ncclRedOp_t>(0x7ffffff0), 0, comm, nullptr),
              ncclInvalidArgument, "operator", "Reduce with op 0x7ffffff0");
  expectError(ctx, ncclBroadcast(a.data(), b.data(), 4, ncclFloat32, n, comm, nullptr), ncclInvalidArgument, "root",
              "Broadcast with root == nranks");
  expectError(ctx, ncclReduce(a.data(), b.data(), 4, ncclFloat32, ncclSum, -1, comm, nullptr), ncclInvalidArgument,
              "root", "Reduce with root -1");
  expectError(ctx, ncclGather(a.data(), b.data(), 4, ncclFloat32, n + 5, comm, nullptr), ncclInvalidArgument, "root",
              "Gather with root out of range");
  expectError(ctx, ncclSend(a.data(), 4, ncclFloat32, n, comm, nullptr), ncclInvalidArgument, "peer",
              "Send to peer == nranks");
  expectError(ctx, ncclRecv(b.data(), 4, ncclFloat32, -2, comm, nullptr), ncclInvalidArgument, "peer",
              "Recv from peer -2");
  expectError(ctx, ncclAllReduce(nullptr, b.data(), 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument,
              "sendbuff", "AllReduce with NULL sendbuff");
  expectError(ctx, ncclAllGather(a.data(), nullptr, 4, ncclFloat32, comm, nullptr), ncclInvalidArgument, "recvbuff",
              "AllGather with NULL recvbuff");
  expectError(ctx, ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument,
              "NULL", "AllReduce with NULL comm");
  expectError(ctx, ncclGroupEnd(), ncclInvalidUsage, "group", "ncclGroupEnd without ncclGroupStart");

  // Counts whose byte size overflows or exceeds any address space: rejected
  // before anything is allocated (no std::bad_alloc, no silent success).
  const size_t huge[] = {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 4 + 1};
  for (size_t count : huge) {
    const std::string tag = " with count " + std::to_string(count);
    expectError(ctx, ncclAllReduce(a.data(), b.data(), count, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument,
                "count", ("AllReduce" + tag).c_str());
    expectError(ctx, ncclAllReduce(a.data(), b.data(), count, ncclInt8, ncclSum, comm, nullptr), ncclInvalidArgument,
                "count", ("AllReduce of int8" + tag).c_str());
    expectError(ctx, ncclBroadcast(a.data(), b.data(), count, ncclFloat64, 0, comm, nullptr), ncclInvalidArgument,
                "count", ("Broadcast" + tag).c_str());
    expectError(ctx, ncclSend(a.data(), count, ncclFloat32, 0, comm, nullptr), ncclInvalidArgument, "count",
                ("Send" + tag).c_str());
    expectError(ctx, ncclRecv(b.data(), count, ncclUint8, 0, comm, nullptr), ncclInvalidArgument, "count",
                ("Recv" + tag).c_str());
  }
  // count fits for one rank, count x nranks does not (gather-type calls).
  if (n > 1) {
    const size_t perRank = (size_t{1} << 57) / static_cast<size_t>(n) + 1;  // bytes of int8
    expectError(ctx, ncclAllGather(a.data(), b.data(), perRank, ncclInt8, comm, nullptr), ncclInvalidArgument, "ranks",
                "AllGather whose count x nranks is too large");
    expectError(ctx, ncclReduceScatter(a.data(), b.data(), perRank, ncclUint8, ncclSum, comm, nullptr),
                ncclInvalidArgument, "ranks", "ReduceScatter whose count x nranks is too large");
    expectError(ctx, ncclAlltoAll(a.data(), b.data(), SIZE_MAX / 2, ncclInt8, comm, nullptr), ncclInvalidArgument,
                "ranks", "AlltoAll whose count x nranks overflows");
    expectError(ctx, ncclGather(a.data(), b.data(), SIZE_MAX / 3, ncclInt8, 0, comm, nullptr), ncclInvalidArgument,
                "ranks", "Gather whose count x nranks overflows");
  }

  // A custom operator: wrong datatype, NULL scalar, then use after destroy.
  float scalar = 2.0f;
  ncclRedOp_t op;
  expectError(ctx, ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat32, ncclScalarHostImmediate, comm),
              ncclInvalidArgument, "scalar", "PreMulSum with NULL scalar");
  if (RANK_OK(ctx, ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm))) {
    expectError(ctx, ncclAllReduce(a.data(), b.data(), 4, ncclInt32, op, comm, nullptr), ncclInvalidArgument,
                "datatype", "PreMulSum op used with another datatype");
    RANK_OK(ctx, ncclRedOpDestroy(op, comm));
    expectError(ctx, ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, op, comm, nullptr), ncclInvalidArgument,
                "operator", "destroyed PreMulSum op");
  }
  expectError(ctx, ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument, "built-in", "destroying ncclSum");

  // Inside a group: the bad call fails and so does the group's end, which
  // must run nothing (peers ran nothing either, so nothing is left waiting).
  RANK_OK(ctx, ncclGroupStart());
  RANK_OK(ctx, ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, ncclSum, comm, nullptr));
  expectError(ctx, ncclAllReduce(a.data(), b.data(), 4, static_cast<ncclDataType_t>(13), ncclSum, comm, nullptr),
              ncclInvalidArgument, "datatype", "bad call inside a group");
  const ncclResult_t end = ncclGroupEnd();
  if (end == ncclSuccess) ctx.fail("rank %d: ncclGroupEnd must report the error of a call in its group", ctx.rank);

  // Zero counts accept NULL buffers.
  RANK_OK(ctx, ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr));
  RANK_OK(ctx, ncclAllGather(nullptr, nullptr, 0, ncclFloat32, comm, nullptr));

  // Other entry points.
  expectError(ctx, ncclCommSplit(comm, -7, 0, nullptr, nullptr), ncclInvalidArgument, "newcomm",
              "ncclCommSplit with NULL newcomm");
  ncclComm_t child = nullptr;
  expectError(ctx, ncclCommSplit(comm, -7, 0, &child, nullptr), ncclInvalidArgument, "color",
              "ncclCommSplit with color -7");
  int bad = n;
  expectError(ctx, ncclCommShrink(comm, &bad, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidArgument, "range",
              "ncclCommShrink excluding an out-of-range rank");
  expectError(ctx, ncclCommCount(comm, nullptr), ncclInvalidArgument, "count", "ncclCommCount(NULL)");
  expectUsable(ctx);
}

class FailureArgs : public ::testing::TestWithParam<int> {};

TEST_P(FailureArgs, BadCollectiveArgumentsThenCommStillWorks) { runThreads(GetParam(), badCollectiveArgs); }

INSTANTIATE_TEST_SUITE_P(Ranks, FailureArgs, ::testing::Values(1, 2, 3));

TEST(FailureArgsProcesses, BadCollectiveArgumentsThenCommStillWorks) { runProcesses(2, badCollectiveArgs); }

TEST(FailureArgsComm, DestroyedCommIsRejected) {
  useHostMode();
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  float x = 0;
  // The library keeps a registry of live communicators and never dereferences a dead one.
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not a live communicator"), std::string::npos)
      << ncclGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(ncclCommCount(comm, &n), ncclInvalidArgument);
}

// Each thread remembers the communicators it found live (CommRegistry): a
// destroy must still reach the calls of a thread that used the handle before.
TEST(FailureArgsComm, DestroyedCommIsRejectedAfterUse) {
  useHostMode();
  ncclComm_t kept = nullptr, gone = nullptr;
  ASSERT_EQ(ncclCommInitAll(&kept, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommInitAll(&gone, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  float x = 1;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, kept, nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, gone, nullptr), ncclSuccess);
  }
  // Destroyed from another thread, which never used it: this thread still holds it as live.
  std::thread([&] { EXPECT_EQ(ncclCommDestroy(gone), ncclSuccess); }).join();
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, gone, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not a live communicator"), std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, kept, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(x, 1.0f);
  EXPECT_EQ(ncclCommDestroy(kept), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, kept, nullptr), ncclInvalidArgument);
}

TEST(FailureArgsComm, InitArgumentsAndConfig) {
  useHostMode();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  RankCtx ctx;
  expectError(ctx, ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "rank", "rank == nranks");
  expectError(ctx, ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks", "nranks 0");
  expectError(ctx, ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument, "comm", "NULL comm pointer");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;  // as if the struct was never initialized
  expectError(ctx, ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "magic",
              "config without NCCL_CONFIG_INITIALIZER");
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 7;
  expectError(ctx, ncclCommInitRankConfig(&comm, 1, id, 0, &blocking), ncclInvalidArgument, "blocking",
              "config.blocking = 7");
  // Fields Chorus does not use are still refused where NCCL refuses them.
  const std::vector<std::pair<const char*, void (*)(ncclConfig_t&)>> unusedButChecked = {
      {"cgaClusterSize", [](ncclConfig_t& c) { c.cgaClusterSize = -5; }},
      {"CTAPolicy", [](ncclConfig_t& c) { c.CTAPolicy = 99; }},
      {"nvlsCTAs", [](ncclConfig_t& c) { c.nvlsCTAs = -2; }},
      {"nChannelsPerNetPeer", [](ncclConfig_t& c) { c.nChannelsPerNetPeer = 0; }},
      {"collnetEnable", [](ncclConfig_t& c) { c.collnetEnable = 2; }},
      {"splitShare", [](ncclConfig_t& c) { c.splitShare = 3; }},
      {"minCTAs", [](ncclConfig_t& c) {
         c.minCTAs = 8;
         c.maxCTAs = 2;
       }}};
  for (const auto& [field, set] : unusedButChecked) {
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    set(bad);
    expectError(ctx, ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument, field, field);
  }

  ncclUniqueId garbage;
  std::memset(&garbage, 0x3c, sizeof(garbage));
  expectError(ctx, ncclCommInitRank(&comm, 1, garbage, 0), ncclInvalidArgument, "unique id", "garbage unique id");

  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  expectError(ctx, ncclCommInitAll(comms, 2, nullptr), ncclInvalidUsage, "group", "ncclCommInitAll inside a group");
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  expectError(ctx, ncclCommInitAll(comms, 0, nullptr), ncclInvalidArgument, "ndev", "ncclCommInitAll(ndev = 0)");

  // The id is still good after all of that.
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  ctx.comm = comm;
  ctx.nranks = 1;
  expectUsable(ctx);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  for (const std::string& m : ctx.messages()) ADD_FAILURE() << m;
}

// Host memory is rounded up to whole pages: a size within a page of
// SIZE_MAX must fail, not wrap to a zero-byte allocation that "succeeds".
// (Sizes the allocator itself refuses are not tried: under AddressSanitizer
// such a request aborts the process instead of failing.)
TEST(FailureArgsComm, MemAllocOfAnImpossibleSizeFails) {
  useHostMode();
  for (size_t size : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - 4094}) {
    void* p = nullptr;
    EXPECT_EQ(ncclMemAlloc(&p, size), ncclSystemError) << size;
    EXPECT_EQ(p, nullptr) << size;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("cannot allocate"), std::string::npos) << size;
  }
  void* p = nullptr;
  ASSERT_EQ(ncclMemAlloc(&p, 4097), ncclSuccess) << ncclGetLastError(nullptr);
  std::memset(p, 1, 4097);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

TEST(FailureArgsComm, ErrorStringsExist) {
  for (int r = ncclSuccess; r < ncclNumResults; ++r) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 0u) << r;
  }
}

}  // namespace
}  // namespace chorus::test
