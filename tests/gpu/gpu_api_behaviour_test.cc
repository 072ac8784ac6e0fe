// GPU mode through the public API, behaviour beyond the results (the
// results of every collective are checked by collectives_api_test.cc):
//  - Calls enqueue and return: with the streams held by a blocking host
//    function, the calls still return, and the results are right afterwards.
//  - CUDA graphs: all-reduces captured on every rank's stream, replayed 10x;
//    a global-mode capture after a warm-up, its replays ordered with eager
//    calls on another stream.
//  - Abort and timeout: a rank whose peer never calls is stopped by
//    ncclCommAbort, or fails by itself after CHORUS_TIMEOUT_MS, in bounded time;
//    aborting an idle rank returns while another rank's kernel spins.
//  - Buffers a kernel cannot reach (pageable host memory, another GPU's) are
//    ncclInvalidArgument and leave the communicators usable.
//  - Registration (ncclCommRegister, ncclMemAlloc, windows), ncclCommCuDevice,
//    ncclGetVersion, and bit-identical results of host and GPU mode for one
//    fixed schedule on data whose sum depends on the order.
//
// Every case skips visibly without a usable GPU (CHORUS_REQUIRE_GPU).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
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

class GpuApi : public ::testing::Test {
 protected:
  void SetUp() override {
    CHORUS_REQUIRE_GPU();
    chorusSetDefaultMode(chorusModeGpu);
  }
  void TearDown() override { chorusSetDefaultMode(chorusModeAuto); }
};

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
      for (int r = 0; r < n; ++r) {
        const cudaError_t launched = cudaGraphLaunch(execs[static_cast<size_t>(r)], g.stream(r));
        if (launched != cudaSuccess) g.abortAll();  // earlier ranks' replays wait for this one
        ASSERT_EQ(launched, cudaSuccess) << "cudaGraphLaunch: " << cudaGetErrorString(launched);
      }
      ASSERT_EQ(g.sync(), "");
      ASSERT_EQ(b.check(g, replay + 2), "");
      ASSERT_EQ(b.check(g, replay + 2, static_cast<float>(n), &twice.recv), "") << "(second, chained all-reduce)";
    }
    for (cudaGraphExec_t e : execs)
      if (e) cudaGraphExecDestroy(e);
  }
}

// PyTorch's pattern: eager warm-up calls (more than the library keeps in
// its recent-call record), a capture in global mode, then replays and eager
// calls on another stream, with no host synchronisation between them. The
// capture must succeed, and a communicator's replays and eager calls must be
// ordered: run at once, they would share the connectors' positions.
TEST_F(GpuApi, GlobalModeCaptureAfterWarmupIsOrderedWithEagerCalls) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  const int n = g.size();
  SumBuffers b(g, (1 << 16) + 5), other(g, (1 << 16) + 5);
  for (int i = 0; i < 12; ++i) ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");

  for (int r = 0; r < n; ++r) CUDA_OK(cudaStreamBeginCapture(g.stream(r), cudaStreamCaptureModeGlobal));
  const ncclResult_t res = allReduceAll(g, b);
  std::vector<cudaGraphExec_t> execs(static_cast<size_t>(n), nullptr);
  for (int r = 0; r < n; ++r) {
    cudaGraph_t graph = nullptr;
    const cudaError_t e = cudaStreamEndCapture(g.stream(r), &graph);
    EXPECT_EQ(e, cudaSuccess) << "rank " << r << ": cudaStreamEndCapture: " << cudaGetErrorString(e);
    if (e != cudaSuccess) continue;
    EXPECT_EQ(cudaGraphInstantiate(&execs[static_cast<size_t>(r)], graph, 0), cudaSuccess);
    cudaGraphDestroy(graph);
  }
  ASSERT_EQ(res, ncclSuccess) << "all-reduce during a global-mode capture: " << ncclGetLastError(nullptr);
  for (cudaGraphExec_t e : execs) ASSERT_NE(e, nullptr);

  std::vector<cudaStream_t> side(static_cast<size_t>(n), nullptr);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(g.device(r));
    CUDA_OK(cudaStreamCreateWithFlags(&side[static_cast<size_t>(r)], cudaStreamNonBlocking));
  }
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (int r = 0; r < n; ++r) {
      b.fill(g, r, round + 2);
      other.fill(g, r, round + 40);
    }
    for (int r = 0; r < n; ++r) {
      const cudaError_t launched = cudaGraphLaunch(execs[static_cast<size_t>(r)], g.stream(r));
      if (launched != cudaSuccess) g.abortAll();  // earlier ranks' replays wait for this one
      ASSERT_EQ(launched, cudaSuccess) << "cudaGraphLaunch: " << cudaGetErrorString(launched);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r)
      ncclAllReduce(other.send[static_cast<size_t>(r)].get(), other.recv[static_cast<size_t>(r)].get(), other.count,
                    ncclFloat32, ncclSum, g.comm(r), side[static_cast<size_t>(r)]);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    const std::string drained = syncStreams(side, Ms(30000));
    if (!drained.empty()) g.abortAll();  // the spinning kernels must not outlive the buffers
    ASSERT_EQ(drained, "");
    ASSERT_EQ(g.sync(), "");
    EXPECT_EQ(b.check(g, round + 2), "") << "(replay)";
    EXPECT_EQ(other.check(g, round + 40), "") << "(eager call on another stream)";
  }
  for (int r = 0; r < n; ++r) {
    cudaGraphExecDestroy(execs[static_cast<size_t>(r)]);
    cudaSetDevice(g.device(r));
    cudaStreamDestroy(side[static_cast<size_t>(r)]);
  }
}

// ---- abort and timeout ---------------------------------------------------------------------

// Rank 0 starts an all-reduce that rank 1 never joins.
ncclResult_t startLonelyAllReduce(GpuRanks& g, SumBuffers& b) {
  return mustReturnWithin("ncclAllReduce on rank 0 whose peer never calls", Ms(5000), [&] {
    return ncclAllReduce(b.send[0].get(), b.recv[0].get(), b.count, ncclFloat32, ncclSum, g.comm(0), g.stream(0));
  });
}

// After one all-reduce on both ranks (connections made), rank 0's kernel
// waits in a second one that rank 1 never joins.
void leaveRankZeroWaiting(GpuRanks& g, SumBuffers& b) {
  ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");
  ASSERT_EQ(startLonelyAllReduce(g, b), ncclSuccess) << ncclGetLastError(g.comm(0));
  std::this_thread::sleep_for(Ms(100));
}

TEST_F(GpuApi, AbortStopsARunningKernel) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, 1 << 20);
  ASSERT_NO_FATAL_FAILURE(leaveRankZeroWaiting(g, b));
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

// Aborting a rank whose own kernels are idle returns at once even while
// another communicator's kernel on the same GPU still spins (here: waiting
// for that very rank). Its GPU memory is freed once no kernel runs: a free
// waits for the whole device, and this kernel ends only with the next abort
// in this thread.
TEST_F(GpuApi, AbortOfAnIdleRankReturnsWhileAnotherRanksKernelSpins) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, 1 << 20);
  ASSERT_NO_FATAL_FAILURE(leaveRankZeroWaiting(g, b));
  ncclComm_t c1 = g.comm(1);
  EXPECT_EQ(mustReturnWithin("ncclCommAbort on the idle rank 1", Ms(5000), [c1] { return ncclCommAbort(c1); }),
            ncclSuccess);
  g.forget(1);
  ncclComm_t c0 = g.comm(0);
  cudaStream_t s0 = g.stream(0);
  EXPECT_EQ(mustReturnWithin("ncclCommAbort on rank 0", Ms(5000), [c0] { return ncclCommAbort(c0); }), ncclSuccess);
  g.forget(0);
  EXPECT_EQ(
      mustReturnWithin("cudaStreamSynchronize after the aborts", Ms(5000), [s0] { return cudaStreamSynchronize(s0); }),
      cudaSuccess);
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
  const std::string msg = commError(g.comm(0));
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

// ---- buffers a kernel cannot reach --------------------------------------------------------------

// A pageable host buffer, and with two GPUs a buffer of the other GPU, are
// ncclInvalidArgument with a message naming it, before any kernel runs (a
// kernel touching them would fault the whole CUDA context); the
// communicators stay usable.
TEST_F(GpuApi, BuffersKernelsCannotReachAreInvalidArgument) {
  GpuRanks g({0, 0});
  ASSERT_TRUE(g.error().empty()) << g.error();
  SumBuffers b(g, 4096);
  std::vector<float> pageable(b.count, 1.0f);
  auto callAll = [&](int r0Send) {
    ncclResult_t res = ncclGroupStart();
    for (int r = 0; r < g.size() && res == ncclSuccess; ++r) {
      const void* send = r == 0 && r0Send == 1 ? static_cast<const void*>(pageable.data()) : b.send[size_t(r)].get();
      res = ncclAllReduce(send, b.recv[size_t(r)].get(), b.count, ncclFloat32, ncclSum, g.comm(r), g.stream(r));
    }
    const ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
  };
  EXPECT_EQ(callAll(1), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("is not device memory"), std::string::npos)
      << ncclGetLastError(nullptr);
  if (deviceCount() >= 2) {
    DevMem other(1, b.count * sizeof(float));
    cudaSetDevice(0);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < g.size(); ++r)
      ncclAllReduce(r == 0 ? other.get() : b.send[size_t(r)].get(), b.recv[size_t(r)].get(), b.count, ncclFloat32,
                    ncclSum, g.comm(r), g.stream(r));
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("is memory of GPU 1"), std::string::npos)
        << ncclGetLastError(nullptr);
  } else {
    std::printf("[ note ] one GPU: the other-GPU buffer case needs two and was not run\n");
  }
  // Both communicators still work.
  ASSERT_EQ(allReduceAll(g, b), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(g.sync(), "");
  EXPECT_EQ(b.check(g, 0), "");
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
