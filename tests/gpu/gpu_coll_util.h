// Helpers of the GPU-mode API tests (collectives_api_test.cc): element codecs
// written here from the formats' definitions (so the library's conversions
// are checked, not reused), device buffers on a chosen device, in-process
// GPU-mode communicators with one stream per rank, bounded waits, and calls
// that must return in time or end the process (a hung CUDA call cannot be
// cancelled, and a hung test is worse than a failed one).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chorus/chorus.h"
#include "core/coll_types.h"
#include "kernels/common/float_types.h"
#include "nccl.h"

namespace chorus::gputest {

using Ms = std::chrono::milliseconds;

// ---- element types ----------------------------------------------------------

// Bytes per element: the library's own table (fp8 types are 1 byte).
using chorus::typeSize;

// Fills output buffers before a call: NaN or a huge value in every float
// type, 127 / 0x7f7f7f7f in integers, so an element the call left alone shows.
constexpr int kPoisonByte = 0x7f;

inline const char* typeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "int8";
    case ncclInt32:
      return "int32";
    case ncclFloat16:
      return "half";
    case ncclBfloat16:
      return "bfloat16";
    case ncclFloat32:
      return "float";
    case ncclFloat64:
      return "double";
    default:
      return "other";
  }
}

// Element i of a buffer of `t` as a double, and back. Half and bfloat16 go
// through the project's own conversions (kernels/common/float_types.h), the
// ones both executors use.
template <typename T>
inline void storeAs(unsigned char* p, T x) {
  std::memcpy(p, &x, sizeof x);
}
template <typename T>
inline T loadAs(const unsigned char* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// Stores v (exactly representable in the cases that compare) as element i.
inline void storeValue(ncclDataType_t t, void* base, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base) + i * typeSize(t);
  switch (t) {
    case ncclInt8:
      return storeAs(p, static_cast<int8_t>(v));
    case ncclInt32:
      return storeAs(p, static_cast<int32_t>(v));
    case ncclFloat32:
      return storeAs(p, static_cast<float>(v));
    case ncclFloat64:
      return storeAs(p, v);
    case ncclFloat16:
      return storeAs(p, floatToHalf(static_cast<float>(v)));
    case ncclBfloat16:
      return storeAs(p, floatToBf16(static_cast<float>(v)));
    default:
      std::abort();
  }
}

inline double loadValue(ncclDataType_t t, const void* base, size_t i) {
  const auto* p = static_cast<const unsigned char*>(base) + i * typeSize(t);
  switch (t) {
    case ncclInt8:
      return loadAs<int8_t>(p);
    case ncclInt32:
      return loadAs<int32_t>(p);
    case ncclFloat32:
      return loadAs<float>(p);
    case ncclFloat64:
      return loadAs<double>(p);
    case ncclFloat16:
      return halfToFloat(loadAs<half_t>(p));
    case ncclBfloat16:
      return bf16ToFloat(loadAs<bf16_t>(p));
    default:
      std::abort();
  }
}

// ---- bounded waits ----------------------------------------------------------

// Runs fn on a helper thread and waits at most `bound` for it. A call still
// running then cannot be cancelled: the process reports it and exits.
template <class Fn>
auto mustReturnWithin(const char* what, Ms bound, Fn&& fn) -> decltype(fn()) {
  using R = decltype(fn());
  std::packaged_task<R()> task(std::forward<Fn>(fn));
  std::future<R> done = task.get_future();
  std::thread worker(std::move(task));
  if (done.wait_for(bound) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: %s did not return within %lld ms; ending the test process\n", what,
                 static_cast<long long>(bound.count()));
    std::fflush(nullptr);
    std::_Exit(1);
  }
  worker.join();
  return done.get();
}

// The communicator's own error message. ncclGetLastError(comm) returns the
// calling thread's last error when it has one: a fresh thread has none, so
// this reads what the communicator recorded (the watchdog's, a kernel's).
inline std::string commError(ncclComm_t comm) {
  return mustReturnWithin("ncclGetLastError", Ms(5000), [comm] { return std::string(ncclGetLastError(comm)); });
}

// Polls the streams until all are idle, one fails, or `bound` passes.
// Returns "" on success, else what went wrong.
inline std::string syncStreams(const std::vector<cudaStream_t>& streams, Ms bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    bool idle = true;
    for (cudaStream_t s : streams) {
      const cudaError_t e = cudaStreamQuery(s);
      if (e == cudaErrorNotReady) {
        idle = false;
      } else if (e != cudaSuccess) {
        return std::string("stream error: ") + cudaGetErrorString(e);
      }
    }
    if (idle) return "";
    if (std::chrono::steady_clock::now() > deadline)
      return "streams still busy after " + std::to_string(bound.count()) + " ms";
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Sets environment variables for a scope (read by the library at init).
class EnvScope {
 public:
  using Vars = std::vector<std::pair<std::string, std::string>>;
  explicit EnvScope(const Vars& vars) {
    for (auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.push_back({k, old ? std::make_pair(true, std::string(old)) : std::make_pair(false, std::string())});
      setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~EnvScope() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second.first)
        setenv(it->first.c_str(), it->second.second.c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

// Sets the process's default mode for a scope, back to auto afterwards.
class ModeScope {
 public:
  explicit ModeScope(chorusMode_t m) { chorusSetDefaultMode(m); }
  ~ModeScope() { chorusSetDefaultMode(chorusModeAuto); }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;
};

// ---- device memory and communicators ----------------------------------------

// The end of a run of in-process ranks: destroys the communicators, or aborts
// them (bounded) when the run failed, then the streams.
inline void closeRun(const std::vector<ncclComm_t>& comms, const std::vector<cudaStream_t>& streams, bool failed) {
  for (ncclComm_t c : comms) {
    if (!failed)
      ncclCommDestroy(c);
    else
      mustReturnWithin("ncclCommAbort after a failed GPU run", Ms(10000), [c] { return ncclCommAbort(c); });
  }
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
}

// Device memory on `device`, freed on destruction. Never 0 bytes, so that
// empty cases still get distinct valid pointers.
class DevMem {
 public:
  DevMem() = default;
  DevMem(int device, size_t bytes) : device_(device), bytes_(bytes) {
    cudaSetDevice(device);
    if (cudaMalloc(&ptr_, bytes ? bytes : 1) != cudaSuccess) ptr_ = nullptr;
  }
  ~DevMem() {
    if (!ptr_) return;
    cudaSetDevice(device_);
    cudaFree(ptr_);
  }
  DevMem(DevMem&& o) noexcept { *this = std::move(o); }
  DevMem& operator=(DevMem&& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return ptr_; }
  char* bytes() const { return static_cast<char*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  int device_ = 0;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Stream-ordered copies; the caller synchronizes.
inline cudaError_t upload(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  return bytes ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s) : cudaSuccess;
}
inline cudaError_t download(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  return bytes ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s) : cudaSuccess;
}

// In-process GPU-mode ranks: ncclCommInitAll over `devices` (a device may
// repeat: several ranks on one GPU), one non-blocking stream per rank on its
// device. Destruction destroys the communicators, or aborts them (bounded)
// after markBroken() or when the streams do not drain.
class GpuRanks {
 public:
  explicit GpuRanks(std::vector<int> devices) : devices_(std::move(devices)) {
    const int n = static_cast<int>(devices_.size());
    comms_.assign(devices_.size(), nullptr);
    const ncclResult_t res = ncclCommInitAll(comms_.data(), n, devices_.data());
    if (res != ncclSuccess) {
      error_ = std::string("ncclCommInitAll: ") + ncclGetErrorString(res) + ": " + ncclGetLastError(nullptr);
      comms_.assign(devices_.size(), nullptr);
      return;
    }
    for (int d : devices_) {
      cudaSetDevice(d);
      cudaStream_t s = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) error_ = "cudaStreamCreate failed";
      streams_.push_back(s);
    }
  }
  ~GpuRanks() {
    if (!broken_ && !syncStreams(streams_, Ms(30000)).empty()) broken_ = true;
    for (size_t r = 0; r < comms_.size(); ++r) {
      if (!comms_[r]) continue;
      ncclComm_t c = comms_[r];
      if (broken_)
        mustReturnWithin("ncclCommAbort at teardown", Ms(10000), [c] { return ncclCommAbort(c); });
      else
        mustReturnWithin("ncclCommDestroy at teardown", Ms(30000), [c] { return ncclCommDestroy(c); });
    }
    for (size_t r = 0; r < streams_.size(); ++r) {
      cudaSetDevice(devices_[r]);
      if (streams_[r]) cudaStreamDestroy(streams_[r]);
    }
  }
  GpuRanks(const GpuRanks&) = delete;
  GpuRanks& operator=(const GpuRanks&) = delete;

  const std::string& error() const { return error_; }
  int size() const { return static_cast<int>(devices_.size()); }
  int device(int r) const { return devices_[static_cast<size_t>(r)]; }
  ncclComm_t comm(int r) const { return comms_[static_cast<size_t>(r)]; }
  cudaStream_t stream(int r) const { return streams_[static_cast<size_t>(r)]; }
  const std::vector<cudaStream_t>& streams() const { return streams_; }
  // The communicator is gone (aborted by the test itself).
  void forget(int r) { comms_[static_cast<size_t>(r)] = nullptr; }
  // Teardown aborts instead of destroying (a rank was left hanging).
  void markBroken() { broken_ = true; }
  bool alive() const { return !aborted_; }
  // Aborts every communicator now and waits for the streams to drain, so
  // that buffers can be freed afterwards (cudaFree waits for the device).
  // ncclCommRevoke first raises every communicator's abort flag at once: a
  // kernel of one rank that waits on a peer whose communicator is not
  // aborted yet stops now instead of waiting for its turn in the loop below.
  void abortAll() {
    broken_ = aborted_ = true;
    for (ncclComm_t c : comms_) {
      if (!c) continue;
      mustReturnWithin("ncclCommRevoke", Ms(10000), [c] { return ncclCommRevoke(c, NCCL_REVOKE_DEFAULT); });
    }
    for (ncclComm_t& c : comms_) {
      if (!c) continue;
      ncclComm_t comm = c;
      mustReturnWithin("ncclCommAbort", Ms(10000), [comm] { return ncclCommAbort(comm); });
      c = nullptr;
    }
    if (syncStreams(streams_, Ms(10000)).find("still busy") != std::string::npos) {
      std::fprintf(stderr, "FATAL: streams still busy 10 s after ncclCommAbort; ending the test process\n");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  }
  // Waits (bounded) for every rank's stream; on a timeout or an error the
  // communicators are aborted and the reason returned.
  std::string sync(Ms bound = Ms(30000)) {
    std::string why = syncStreams(streams_, bound);
    if (!why.empty()) abortAll();
    return why;
  }

 private:
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::string error_;
  bool broken_ = false;
  bool aborted_ = false;
};

inline int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

}  // namespace chorus::gputest
