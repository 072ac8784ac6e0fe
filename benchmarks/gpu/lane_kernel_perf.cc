// lane_kernel_perf: the lane kernel's two protocols on one GPU, before the
// executor exists. One launch has two lanes: lane 0 sends a buffer through a
// connector in device memory, lane 1 receives it, adds its own input and
// writes the result (a 2-rank reduce's data path).
//
//   lane_kernel_perf [-n ITERS] [-w WARMUP]
//
// Reported per size and protocol: the median time of a whole launch (what an
// 8-byte call costs at the least) and the bandwidth of the bytes the receiving
// lane reads and writes (3 x size: slot, input, output), next to a
// device-to-device copy of the same size in the same run (2 x size).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "benchmarks/gpu/gpu_timing.h"
#include "kernels/launch.h"

namespace {

// The connector's counters, and each end's position, in one device allocation.
struct Counters {
  uint64_t tail, head, sendPos, recvPos;
  uint32_t sizes[64];
};

}  // namespace

int main(int argc, char** argv) {
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-n"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-w"))
      warmup = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [-n ITERS] [-w WARMUP]\n", argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("lane_kernel_perf: SKIPPED: no CUDA device\n");
    return 77;
  }
  if (!chorus::dev::kernelCompiled(ncclFloat32, chorus::ReduceKind::Sum)) {
    std::printf("lane_kernel_perf: SKIPPED: f32:sum filtered out of this build\n");
    return 77;
  }
  const size_t maxBytes = size_t(256) << 20;
  void *in0, *in1, *out, *slots, *copyDst;
  Counters* ctl;
  const uint32_t simpleSlot = 1 << 20, llSlot = 8192, nslots = 4;
  CHECK_CUDA(cudaMalloc(&in0, maxBytes));
  CHECK_CUDA(cudaMalloc(&in1, maxBytes));
  CHECK_CUDA(cudaMalloc(&out, maxBytes));
  CHECK_CUDA(cudaMalloc(&copyDst, maxBytes));
  CHECK_CUDA(cudaMalloc(&slots, size_t(simpleSlot) * nslots));
  CHECK_CUDA(cudaMalloc(&ctl, sizeof(Counters)));
  CHECK_CUDA(cudaMemset(in0, 0, maxBytes));
  CHECK_CUDA(cudaMemset(in1, 0, maxBytes));

  std::printf("%12s %8s %12s %12s %12s %10s\n", "bytes", "proto", "launch(us)", "GB/s", "copy GB/s", "vs copy");
  for (size_t bytes : {size_t(8), size_t(1) << 10, size_t(1) << 20, size_t(64) << 20, maxBytes}) {
    for (auto proto : {chorus::dev::Protocol::LL, chorus::dev::Protocol::Simple}) {
      if (proto == chorus::dev::Protocol::LL && bytes > (size_t(1) << 20)) continue;
      const uint32_t slotBytes = proto == chorus::dev::Protocol::LL ? llSlot : simpleSlot;
      chorus::dev::DevFifo f;
      f.tail = &ctl->tail;
      f.head = &ctl->head;
      f.sizes = ctl->sizes;
      f.slots = static_cast<char*>(slots);
      f.slotBytes = slotBytes;
      f.nslots = nslots;
      chorus::dev::DevFifo sendEnd = f, recvEnd = f;
      sendEnd.position = &ctl->sendPos;
      recvEnd.position = &ctl->recvPos;
      sendEnd.peer = 1;
      recvEnd.peer = 0;
      // One Single segment per lane: lane 0 sends in0; lane 1 receives, adds in1, writes out.
      namespace sched = chorus::sched;
      sched::Segment segments[2];
      segments[0].conn[2] = 0;
      segments[0].src = in0;
      segments[0].count = bytes / 4;
      segments[0].flags = sched::kSegHasSrc;
      segments[1].conn[0] = 1;
      segments[1].src = in1;
      segments[1].dst = out;
      segments[1].count = bytes / 4;
      segments[1].flags = sched::kSegHasSrc | sched::kSegHasDst;
      const uint32_t piece = proto == chorus::dev::Protocol::LL ? chorus::dev::llPayloadBytes(slotBytes) : slotBytes;
      chorus::dev::DevLane lanes[2] = {{0, 1, piece, proto}, {1, 1, piece, proto}};
      chorus::dev::DevFifo fifos[2] = {sendEnd, recvEnd};
      CHECK_CUDA(cudaMemset(ctl, 0, sizeof(Counters)));
      CHECK_CUDA(cudaMemset(slots, 0, size_t(simpleSlot) * nslots));  // LL lines start with flag 0
      chorus::dev::LaneLaunch L;
      L.type = ncclFloat32;
      L.kind = chorus::ReduceKind::Sum;
      L.lanes = lanes;
      L.nLanes = 2;
      L.segments = segments;
      L.nSegments = 2;
      L.fifos = fifos;
      L.nFifos = 2;
      L.threads = 512;
      L.timeoutNs = 10ull * 1000 * 1000 * 1000;
      const double us =
          1000.0 * chorus::bench::medianMs(iters, warmup, [&] { CHECK_CUDA(chorus::dev::launchLanes(L, nullptr)); });
      const double copyUs = 1000.0 * chorus::bench::medianMs(iters, warmup, [&] {
                              CHECK_CUDA(cudaMemcpyAsync(copyDst, in0, bytes, cudaMemcpyDeviceToDevice));
                            });
      const double gbs = 3.0 * bytes / (us * 1e3), copyGbs = 2.0 * bytes / (copyUs * 1e3);
      std::printf("%12zu %8s %12.2f %12.1f %12.1f %10.2f\n", bytes,
                  proto == chorus::dev::Protocol::LL ? "LL" : "Simple", us, gbs, copyGbs, gbs / copyGbs);
    }
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  return 0;
}
