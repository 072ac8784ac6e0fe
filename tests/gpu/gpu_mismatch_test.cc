// GPU mode, failure semantics of issue 11 (docs/reliability.md, "Operation
// fingerprints" and "Stall reports"), with two ranks as communicators of one
// process on one GPU:
//  - Ranks that make different calls (float vs int32, 1000 vs 2000 elements,
//    AllReduce vs Broadcast) both fail with ncclInvalidUsage within 1 s, and
//    ncclGetLastError names both calls; the kernels end (the streams drain).
//    The lane kernel checks the fingerprints (step::printMatches) and leaves
//    the verdict on its FIFOs for the peer; calls that need different
//    connectors are found by the setup notes (plan/setup_notes.h).
//  - A rank whose peer does not call logs the stall WARN line after
//    CHORUS_STALL_WARN_S (2 s here) naming the op and the rank that has not
//    called it, and the JSON status shows the call in flight and the peer
//    waited on; once the peer calls, both succeed (a stall is not an error).
//
// Every case skips visibly without a usable GPU (CHORUS_REQUIRE_GPU).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/status_report.h"
#include "gpu/gpu_coll_util.h"
#include "gpu/gpu_test_util.h"

namespace chorus::gputest {
namespace {

constexpr int64_t kBoundMs = 1000;

class GpuFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    CHORUS_REQUIRE_GPU();
    chorusSetDefaultMode(chorusModeGpu);
  }
  void TearDown() override { chorusSetDefaultMode(chorusModeAuto); }
};

// Per rank: a send and a receive buffer of up to 2000 elements of 4 bytes.
struct Buffers {
  std::vector<DevMem> send, recv;
  explicit Buffers(GpuRanks& g) {
    for (int r = 0; r < g.size(); ++r) {
      send.emplace_back(g.device(r), 2000 * 4);
      recv.emplace_back(g.device(r), 2000 * 4);
      cudaMemset(send.back().get(), 0, 2000 * 4);
    }
  }
};

// One rank's call: enqueues it on the rank's stream.
using Call = std::function<ncclResult_t(GpuRanks&, Buffers&, int rank)>;

Call allReduce(size_t count, ncclDataType_t t) {
  return [=](GpuRanks& g, Buffers& b, int r) {
    return ncclAllReduce(b.send[static_cast<size_t>(r)].get(), b.recv[static_cast<size_t>(r)].get(), count, t, ncclSum,
                         g.comm(r), g.stream(r));
  };
}
Call broadcast(size_t count, int root) {
  return [=](GpuRanks& g, Buffers& b, int r) {
    return ncclBroadcast(b.send[static_cast<size_t>(r)].get(), b.recv[static_cast<size_t>(r)].get(), count, ncclFloat32,
                         root, g.comm(r), g.stream(r));
  };
}

// Every rank's call in one group (this thread drives both ranks).
ncclResult_t callAll(GpuRanks& g, Buffers& b, const std::vector<Call>& calls) {
  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < g.size() && res == ncclSuccess; ++r) res = calls[static_cast<size_t>(r)](g, b, r);
  const ncclResult_t end = ncclGroupEnd();
  return res != ncclSuccess ? res : end;
}

// The communicator's error once it has one, polled up to `boundMs` after
// `t0` (*ms: when it was seen); the message is ncclGetLastError right after.
ncclResult_t awaitError(ncclComm_t comm, std::chrono::steady_clock::time_point t0, int64_t boundMs, std::string* msg,
                        int64_t* ms) {
  ncclResult_t state = ncclSuccess;
  for (;;) {
    const ncclResult_t q =
        mustReturnWithin("ncclCommGetAsyncError", Ms(5000), [&] { return ncclCommGetAsyncError(comm, &state); });
    *ms = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - t0).count();
    if (q != ncclSuccess) return q;
    if (state != ncclSuccess && state != ncclInProgress) break;
    if (*ms > boundMs) return state;
    std::this_thread::sleep_for(Ms(2));
  }
  *msg = commError(comm);
  return state;
}

// Op #1, the same correct call on both ranks: the connectors exist afterwards.
void warmUp(GpuRanks& g, Buffers& b) {
  ASSERT_TRUE(g.error().empty()) << g.error();
  ASSERT_EQ(callAll(g, b, {allReduce(1000, ncclFloat32), allReduce(1000, ncclFloat32)}), ncclSuccess)
      << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");
}

// How a mismatch case runs: `pinned`: one ring, one channel, LL, so both
// calls of every pair run over the same connectors (the lane kernel finds
// the mismatch in the slots); unpinned, the tuner gives a 2-rank AllReduce
// the Direct connectors and a Broadcast the ring's, so the rank whose call
// needs new ones waits in setup and the setup notes find it. `warm`: op #1
// is a matching AllReduce first (the mismatch is op #2), else the
// mismatch is the first call.
struct Setting {
  bool pinned = true;
  bool warm = true;
};

// Then `mismatched`: every rank must fail with ncclInvalidUsage within
// kBoundMs, naming both calls.
void expectMismatch(const std::vector<Call>& mismatched, const std::vector<std::string>& needles,
                    Setting setting = {}) {
  EnvScope env(setting.pinned ? EnvScope::Vars{{"NCCL_ALGO", "Ring"},
                                               {"NCCL_PROTO", "LL"},
                                               {"NCCL_MIN_NCHANNELS", "1"},
                                               {"NCCL_MAX_NCHANNELS", "1"}}
                              : EnvScope::Vars{});
  GpuRanks g({0, 0});
  Buffers b(g);
  if (setting.warm) warmUp(g, b);
  if (::testing::Test::HasFatalFailure()) return;
  g.markBroken();  // teardown aborts: the communicators are failed after this
  const auto t0 = std::chrono::steady_clock::now();
  const ncclResult_t launched = callAll(g, b, mismatched);
  ASSERT_TRUE(launched == ncclSuccess || launched == ncclInvalidUsage) << ncclGetErrorString(launched);
  for (int r = 0; r < g.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    std::string msg;
    int64_t ms = 0;
    const ncclResult_t err = awaitError(g.comm(r), t0, 2000, &msg, &ms);
    EXPECT_EQ(err, ncclInvalidUsage) << ncclGetErrorString(err) << " after " << ms << " ms: " << msg;
    EXPECT_LE(ms, kBoundMs) << "the mismatch took " << ms << " ms after the calls to surface";
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "the error \"" << msg << "\" does not mention \"" << n << "\"";
  }
  // The kernels stopped: the streams drain without an abort from the test.
  // If they did not, the test aborts them before its buffers are freed
  // (cudaFree would wait for the spinning kernels).
  const std::string drained = syncStreams(g.streams(), Ms(5000));
  if (!drained.empty()) g.abortAll();
  EXPECT_EQ(drained, "");
}

TEST_F(GpuFailure, DatatypeMismatchNamesBothCalls) {
  expectMismatch({allReduce(1000, ncclFloat32), allReduce(1000, ncclInt32)},
                 {"op #2", "AllReduce(1000 x float, sum)", "AllReduce(1000 x int32, sum)"});
}

TEST_F(GpuFailure, CountMismatchNamesBothCalls) {
  expectMismatch({allReduce(1000, ncclFloat32), allReduce(2000, ncclFloat32)},
                 {"op #2", "AllReduce(1000 x float, sum)", "AllReduce(2000 x float, sum)"});
}

TEST_F(GpuFailure, CollectiveMismatchNamesBothCalls) {
  expectMismatch({broadcast(1000, 0), allReduce(1000, ncclFloat32)},
                 {"op #2", "Broadcast(1000 x float, root 0)", "AllReduce(1000 x float, sum)"});
}

TEST_F(GpuFailure, CollectiveMismatchOverDifferentConnectorsNamesBothCalls) {
  expectMismatch({broadcast(1000, 0), allReduce(1000, ncclFloat32)},
                 {"op #2", "Broadcast(1000 x float, root 0)", "AllReduce(1000 x float, sum)"}, Setting{false, true});
}

TEST_F(GpuFailure, FirstCallCollectiveMismatchNamesBothCalls) {
  expectMismatch({broadcast(1000, 0), allReduce(1000, ncclFloat32)},
                 {"op #1", "Broadcast(1000 x float, root 0)", "AllReduce(1000 x float, sum)"}, Setting{false, false});
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(GpuFailure, StallLineNamesTheRankThatHasNotCalled) {
  const std::string log = "/tmp/chorus-gpu-stall-" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  {
    EnvScope env(EnvScope::Vars{{"CHORUS_STALL_WARN_S", "2"}, {"NCCL_DEBUG", "WARN"}, {"NCCL_DEBUG_FILE", log}});
    logReset();
    GpuRanks g({0, 0});
    Buffers b(g);
    warmUp(g, b);
    if (HasFatalFailure()) return;
    // Op #2 on rank 0 only: its kernel waits for rank 1.
    ASSERT_EQ(allReduce(1000, ncclFloat32)(g, b, 0), ncclSuccess) << ncclGetLastError(g.comm(0));
    std::string text;
    const auto t0 = std::chrono::steady_clock::now();
    while (text.find("no progress for") == std::string::npos &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15)) {
      std::this_thread::sleep_for(Ms(100));
      text = readFile(log);
    }
    const std::string status = statusReportJson();
    // Now rank 1 calls: both finish, successfully.
    EXPECT_EQ(allReduce(1000, ncclFloat32)(g, b, 1), ncclSuccess) << ncclGetLastError(g.comm(1));
    EXPECT_EQ(g.sync(Ms(10000)), "");
    for (int r = 0; r < g.size(); ++r) {
      ncclResult_t state = ncclInternalError;
      EXPECT_EQ(ncclCommGetAsyncError(g.comm(r), &state), ncclSuccess);
      EXPECT_EQ(state, ncclSuccess) << "rank " << r << ": a stall must not become an error";
    }
    EXPECT_NE(text.find("rank 0: no progress for"), std::string::npos) << "no stall line in the log:\n" << text;
    EXPECT_NE(text.find("op #2 AllReduce(1000 x float, sum)"), std::string::npos) << text;
    // Rank 1 is in this process: its status answer comes at once.
    EXPECT_NE(text.find("rank 1 last completed op #1 and has not called since"), std::string::npos) << text;
    EXPECT_EQ(text.find("rank 1: no progress for"), std::string::npos) << "rank 1 was not waiting:\n" << text;
    EXPECT_NE(status.find("\"mode\": \"gpu\""), std::string::npos) << status;
    EXPECT_NE(status.find("\"opNumber\": 2"), std::string::npos) << status;
    EXPECT_NE(status.find("\"waitsOn\": {\"peer\": 1"), std::string::npos) << status;
  }
  logReset();
  std::remove(log.c_str());
}

}  // namespace
}  // namespace chorus::gputest
