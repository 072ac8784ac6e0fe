// One schedule, two executors: with the algorithm, protocol and channel
// count pinned (NCCL_ALGO=Ring, NCCL_PROTO=Simple, config minCTAs = maxCTAs),
// host mode and GPU mode must add the same operands in the same order and
// round the same way, so their results are identical to the bit even on data
// whose sum depends on the order (random signs, mantissas and exponents).
// Checked for float, half and bfloat16 all-reduce and float reduce-scatter,
// on 2 and 4 ranks (all on device 0 in GPU mode), and for an int8
// all-reduce of more than 2^31 elements (64-bit offsets, multi-GiB buffers).
// Skips without a GPU.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/gpu_coll_util.h"
#include "gpu/gpu_test_util.h"

namespace chorus::gputest {
namespace {

constexpr int kChannels = 2;

// Random finite values, bits drawn directly: sign, fraction, and an exponent
// in a range where sums of a few ranks neither overflow nor underflow.
std::vector<unsigned char> orderSensitive(ncclDataType_t t, int rank, size_t count) {
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1) + static_cast<uint64_t>(t);
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<unsigned char> out(count * typeSize(t));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = next();
    const uint64_t sign = x & 1;
    const auto e = static_cast<int64_t>((x >> 1) % 25) - 12;  // [-12, 12]
    if (t == ncclFloat32) {
      const auto bits = static_cast<uint32_t>((sign << 31) | (static_cast<uint64_t>(127 + e) << 23) | (x >> 41));
      std::memcpy(&out[i * 4], &bits, 4);
    } else if (t == ncclBfloat16) {
      const auto bits = static_cast<uint16_t>((sign << 15) | (static_cast<uint64_t>(127 + e) << 7) | (x >> 57));
      std::memcpy(&out[i * 2], &bits, 2);
    } else {  // half: exponent [-6, 6], so four ranks stay far below 65504
      const uint64_t he = static_cast<uint64_t>(15 + e / 2);
      const auto bits = static_cast<uint16_t>((sign << 15) | (he << 10) | (x >> 54));
      std::memcpy(&out[i * 2], &bits, 2);
    }
  }
  return out;
}

struct Shape {
  ncclDataType_t type;
  bool reduceScatter;
  size_t count;  // per-rank output elements
};

std::string describe(const Shape& run, int n) {
  return std::string(run.reduceScatter ? "ReduceScatter " : "AllReduce ") + typeName(run.type) +
         " count=" + std::to_string(run.count) + " nranks=" + std::to_string(n);
}

// Creates n communicators from this thread (one group) in the current
// default mode, with the channel count pinned.
std::string initComms(int n, bool gpu, std::vector<ncclComm_t>* comms) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return std::string("ncclGetUniqueId: ") + ncclGetLastError(nullptr);
  comms->assign(static_cast<size_t>(n), nullptr);
  const ncclConfig_t initial = NCCL_CONFIG_INITIALIZER;
  std::vector<ncclConfig_t> configs(static_cast<size_t>(n), initial);
  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < n && res == ncclSuccess; ++r) {
    configs[static_cast<size_t>(r)].minCTAs = kChannels;
    configs[static_cast<size_t>(r)].maxCTAs = kChannels;
    if (gpu) cudaSetDevice(0);
    res = ncclCommInitRankConfig(&(*comms)[static_cast<size_t>(r)], n, id, r, &configs[static_cast<size_t>(r)]);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (res != ncclSuccess || end != ncclSuccess)
    return std::string("grouped ncclCommInitRankConfig: ") + ncclGetErrorString(res != ncclSuccess ? res : end) + ": " +
           ncclGetLastError(nullptr);
  for (ncclComm_t c : *comms) {
    chorusMode_t mode = chorusModeAuto;
    chorusCommGetMode(c, &mode);
    if (mode != (gpu ? chorusModeGpu : chorusModeHost)) return "communicator is not in the requested mode";
  }
  return "";
}

ncclResult_t issue(const Shape& run, const void* send, void* recv, ncclComm_t comm, cudaStream_t s) {
  if (run.reduceScatter) return ncclReduceScatter(send, recv, run.count, run.type, ncclSum, comm, s);
  return ncclAllReduce(send, recv, run.count, run.type, ncclSum, comm, s);
}

// Results of every rank, host mode.
std::string runHost(const Shape& run, const std::vector<std::vector<unsigned char>>& inputs,
                    std::vector<std::vector<unsigned char>>* outputs) {
  const int n = static_cast<int>(inputs.size());
  ModeScope mode(chorusModeHost);
  std::vector<ncclComm_t> comms;
  std::string why = initComms(n, false, &comms);
  if (!why.empty()) return "host mode: " + why;
  outputs->assign(static_cast<size_t>(n), std::vector<unsigned char>(run.count * typeSize(run.type), 0xee));
  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < n && res == ncclSuccess; ++r)
    res = issue(run, inputs[static_cast<size_t>(r)].data(), (*outputs)[static_cast<size_t>(r)].data(),
                comms[static_cast<size_t>(r)], nullptr);
  const ncclResult_t end = ncclGroupEnd();
  if (res != ncclSuccess || end != ncclSuccess) why = std::string("host mode call: ") + ncclGetLastError(nullptr);
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  return why;
}

// Results of every rank, GPU mode on device 0.
std::string runGpu(const Shape& run, const std::vector<std::vector<unsigned char>>& inputs,
                   std::vector<std::vector<unsigned char>>* outputs) {
  const int n = static_cast<int>(inputs.size());
  const size_t outBytes = run.count * typeSize(run.type);
  ModeScope mode(chorusModeGpu);
  std::vector<ncclComm_t> comms;
  std::string why = initComms(n, true, &comms);
  if (!why.empty()) return "GPU mode: " + why;
  std::vector<DevMem> send, recv;
  std::vector<cudaStream_t> streams(static_cast<size_t>(n), nullptr);
  cudaSetDevice(0);
  for (int r = 0; r < n; ++r) {
    const auto& in = inputs[static_cast<size_t>(r)];
    cudaStreamCreateWithFlags(&streams[static_cast<size_t>(r)], cudaStreamNonBlocking);
    send.emplace_back(0, in.size());
    recv.emplace_back(0, outBytes);
    upload(send.back().get(), in.data(), in.size(), streams[static_cast<size_t>(r)]);
    cudaMemsetAsync(recv.back().get(), 0xee, outBytes, streams[static_cast<size_t>(r)]);
  }
  why = syncStreams(streams, Ms(30000));
  ncclResult_t res = ncclGroupStart();
  for (int r = 0; r < n && res == ncclSuccess && why.empty(); ++r)
    res = issue(run, send[static_cast<size_t>(r)].get(), recv[static_cast<size_t>(r)].get(),
                comms[static_cast<size_t>(r)], streams[static_cast<size_t>(r)]);
  const ncclResult_t end = ncclGroupEnd();
  if (why.empty() && (res != ncclSuccess || end != ncclSuccess))
    why = std::string("GPU mode call: ") + ncclGetLastError(nullptr);
  if (why.empty()) why = syncStreams(streams, Ms(30000));
  outputs->assign(static_cast<size_t>(n), std::vector<unsigned char>(outBytes));
  for (int r = 0; r < n && why.empty(); ++r) {
    download((*outputs)[static_cast<size_t>(r)].data(), recv[static_cast<size_t>(r)].get(), outBytes,
             streams[static_cast<size_t>(r)]);
    why = syncStreams(streams, Ms(30000));
  }
  closeRun(comms, streams, !why.empty());
  return why;
}

// Share of elements whose float sum over ranks differs between ascending and
// descending rank order: evidence that the data can tell orders apart.
double orderSensitivity(const std::vector<std::vector<unsigned char>>& inputs, size_t count) {
  size_t differ = 0;
  for (size_t i = 0; i < count; ++i) {
    float up = 0, down = 0;
    for (size_t r = 0; r < inputs.size(); ++r) {
      float a, b;
      std::memcpy(&a, &inputs[r][i * 4], 4);
      std::memcpy(&b, &inputs[inputs.size() - 1 - r][i * 4], 4);
      up += a;
      down += b;
    }
    differ += std::memcmp(&up, &down, 4) != 0;
  }
  return count ? static_cast<double>(differ) / static_cast<double>(count) : 0.0;
}

// Every element of rank r's result is the same in host mode (h) and GPU
// mode (d). One memcmp of the whole buffer first: multi-GiB results that
// agree cost a single pass.
void expectSameBits(const Shape& run, int r, const std::vector<unsigned char>& h, const std::vector<unsigned char>& d) {
  ASSERT_EQ(h.size(), d.size());
  if (std::memcmp(h.data(), d.data(), h.size()) == 0) return;
  const size_t esz = typeSize(run.type);
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < run.count; ++i) {
    if (std::memcmp(&h[i * esz], &d[i * esz], esz) == 0) continue;
    if (differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "rank " << r << ": " << differ << " of " << run.count
                        << " elements differ between host and GPU mode; first at " << first << ": host "
                        << loadValue(run.type, h.data(), first) << ", GPU " << loadValue(run.type, d.data(), first);
}

TEST(HostGpuIdentity, FixedScheduleGivesIdenticalBits) {
  CHORUS_REQUIRE_GPU();
  EnvScope env(EnvScope::Vars{{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}});
  const std::vector<Shape> runs = {{ncclFloat32, false, 1031},          {ncclFloat32, false, (1 << 20) + 3},
                                   {ncclFloat16, false, (1 << 20) + 3}, {ncclBfloat16, false, (1 << 20) + 3},
                                   {ncclFloat32, true, 1031},           {ncclFloat32, true, (1 << 18) + 3}};
  for (int n : {2, 4}) {
    for (const Shape& run : runs) {
      SCOPED_TRACE(describe(run, n));
      const size_t inCount = run.reduceScatter ? run.count * static_cast<size_t>(n) : run.count;
      std::vector<std::vector<unsigned char>> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(orderSensitive(run.type, r, inCount));
      if (run.type == ncclFloat32 && n == 4 && !run.reduceScatter && run.count > 1000)
        std::printf("note: %s: %.0f%% of the sums depend on the order\n", describe(run, n).c_str(),
                    100.0 * orderSensitivity(inputs, inCount));
      std::vector<std::vector<unsigned char>> host, gpu;
      ASSERT_EQ(runHost(run, inputs, &host), "");
      ASSERT_EQ(runGpu(run, inputs, &gpu), "");
      for (int r = 0; r < n; ++r) expectSameBits(run, r, host[static_cast<size_t>(r)], gpu[static_cast<size_t>(r)]);
    }
  }
}

// ---- more than 2^31 elements ---------------------------------------------------

// Random bytes, drawn 8 at a time (splitmix64), different for every rank:
// a chunk reduced or written at the wrong offset cannot go unnoticed.
std::vector<unsigned char> randomBytes(int rank, size_t bytes) {
  uint64_t state = 0x2545f4914f6cdd1dull * static_cast<uint64_t>(rank + 1);
  std::vector<unsigned char> out(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(&out[i], &z, bytes - i < 8 ? bytes - i : 8);
  }
  return out;
}

// MemAvailable of /proc/meminfo, else the free pages; in bytes.
size_t availableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Empty when device 0 and the host have room for an all-reduce of `bytes`
// per rank on n ranks, else why not. GPU: n send and n receive buffers, and
// 1 GiB for the library. Host: inputs and the results of both modes, and 2 GiB.
std::string whyNoRoom(size_t bytes, int n) {
  const size_t gib = size_t{1} << 30;
  size_t freeDev = 0, totalDev = 0;
  if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&freeDev, &totalDev) != cudaSuccess)
    return "cudaMemGetInfo failed";
  const size_t needDev = 2 * static_cast<size_t>(n) * bytes + gib;
  if (freeDev < needDev)
    return "device 0 has " + std::to_string(freeDev / gib) + " GiB free, " + std::to_string(needDev / gib + 1) +
           " GiB needed";
  const size_t needHost = 3 * static_cast<size_t>(n) * bytes + 2 * gib;
  const size_t freeHost = availableHostBytes();
  if (freeHost < needHost)
    return "the host has " + std::to_string(freeHost / gib) + " GiB available, " + std::to_string(needHost / gib + 1) +
           " GiB needed";
  return "";
}

// Elements of `out` that are not the int8 sum (mod 256) of a and b; the
// first of them in *first. The counting loop vectorizes.
size_t wrongInt8Sums(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                     const std::vector<unsigned char>& out, size_t* first) {
  size_t wrong = 0;
  for (size_t i = 0; i < out.size(); ++i) wrong += static_cast<unsigned char>(a[i] + b[i]) != out[i];
  for (size_t i = 0; i < out.size() && wrong; ++i)
    if (static_cast<unsigned char>(a[i] + b[i]) != out[i]) {
      *first = i;
      break;
    }
  return wrong;
}

// An int8 all-reduce of 2^31 + 4099 elements (2 GiB + 4099 B per rank) on 2
// ranks: offsets and counts above 2^31 must survive both executors, so both
// results are checked against the sums computed here (a count cut to 32
// bits would leave the same untouched tail in both), and the GPU's against
// the host's bit for bit.
TEST(HostGpuIdentity, AllReduceAbove2To31Elements) {
  CHORUS_REQUIRE_GPU();
  const int n = 2;
  const Shape run{ncclInt8, false, (size_t{1} << 31) + 4099};
  const std::string noRoom = whyNoRoom(run.count, n);
  if (!noRoom.empty()) GTEST_SKIP() << "GPU test skipped: " << noRoom;
  EnvScope env(EnvScope::Vars{{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}});
  SCOPED_TRACE(describe(run, n));
  std::vector<std::vector<unsigned char>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(randomBytes(r, run.count));
  auto expectSums = [&](const char* mode, const std::vector<std::vector<unsigned char>>& outputs) {
    for (int r = 0; r < n; ++r) {
      size_t first = 0;
      const size_t wrong = wrongInt8Sums(inputs[0], inputs[1], outputs[static_cast<size_t>(r)], &first);
      EXPECT_EQ(wrong, 0u) << mode << ", rank " << r << ": " << wrong << " of " << run.count
                           << " elements are not the sum; first at " << first;
    }
  };
  std::vector<std::vector<unsigned char>> host, gpu;
  ASSERT_EQ(runHost(run, inputs, &host), "");
  expectSums("host mode", host);
  ASSERT_EQ(runGpu(run, inputs, &gpu), "");
  expectSums("GPU mode", gpu);
  for (int r = 0; r < n; ++r) expectSameBits(run, r, host[static_cast<size_t>(r)], gpu[static_cast<size_t>(r)]);
}

}  // namespace
}  // namespace chorus::gputest
