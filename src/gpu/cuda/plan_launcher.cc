// The GPU executor's launch path: a rank's Plan becomes one or more lane
// kernel launches on the caller's stream (CUDA builds only).
//
// The plan is translated once (src/gpu/lane_translate.h) and the result kept
// with the cached plan; a launch then only copies the arrays into the
// kernel's parameters. Nothing is allocated or uploaded per call, which is
// what makes a launch cheap and lets a CUDA graph capture it: the graph holds
// the parameters, and the position counters in device memory carry each
// connector's progress from one launch (or replay) to the next.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/log.h"
#include "core/op_fingerprint.h"
#include "gpu/cuda/comm_state.h"
#include "gpu/cuda/cuda_util.h"
#include "gpu/gpu_runtime.h"
#include "gpu/lane_translate.h"
#include "gpu/launch_policy.h"
#include "kernels/launch.h"
#include "plan/setup_notes.h"

namespace chorus::gpu {

struct DeviceForm {
  std::vector<LaunchArrays> launches;
};

namespace {

ncclResult_t checkLaunchable(const ncclComm* comm, const CommState& st, const LaunchArrays& la) {
  if (!dev::kernelCompiled(la.header.type, la.header.kind))
    return fail(ncclInvalidUsage,
                "rank %d: this build has no GPU kernel for datatype %d with reduction %s (built with "
                "CHORUS_KERNEL_FILTER=%s; rebuild with -DCHORUS_KERNEL_FILTER=all)",
                comm->id.rank, static_cast<int>(la.header.type), reduceKindName(la.header.kind), dev::kernelFilter());
  if (static_cast<int>(la.lanes.size()) > st.maxLanes)
    return fail(ncclInvalidUsage,
                "rank %d: a launch needs %zu thread blocks, but %d ranks share GPU %d and each may use at most %d so "
                "that all their kernels run at once; lower NCCL_MAX_NCHANNELS/NCCL_MAX_CTAS",
                comm->id.rank, la.lanes.size(), st.ranksOnDevice, st.device, st.maxLanes);
  return ncclSuccess;
}

ncclResult_t deviceFormOf(Plan& plan, CommState& st, const DeviceForm** out) {
  if (plan.deviceForm) {
    *out = static_cast<const DeviceForm*>(plan.deviceForm.get());
    return ncclSuccess;
  }
  auto form = std::make_shared<DeviceForm>();
  PositionFor positionFor = [&st](const FifoEnd& end, bool sender) { return st.positions.counterFor(end.ctl, sender); };
  CHORUS_CHECK(translatePlan(plan, positionFor, &form->launches, static_cast<size_t>(st.maxLanes)));
  for (const LaunchArrays& la : form->launches) CHORUS_CHECK(checkLaunchable(plan.comm, st, la));
  *out = form.get();
  plan.deviceForm = std::move(form);
  return ncclSuccess;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return capture != cudaStreamCaptureStatusNone;
}

// A launch waits for the communicator's previous one when that may have
// been on another stream: a different stream outside capture; always in a
// capture (an external wait node: each replay waits for the launch before
// it) and, once a graph holds such nodes, always outside capture too.
ncclResult_t orderAfterPrevious(CommState& st, cudaStream_t stream, bool inCapture) {
  unsigned long long id = 0;
  CHORUS_CUDA_CHECK(cudaStreamGetId(stream, &id));
  std::lock_guard<std::mutex> lock(st.launchMutex);
  if (st.last == nullptr) CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&st.last, cudaEventDisableTiming));
  if (inCapture) {
    CHORUS_CUDA_CHECK(cudaStreamWaitEvent(stream, st.last, cudaEventWaitExternal));
    return ncclSuccess;
  }
  if (st.captured || (st.launchedBefore && st.lastStream != id))
    CHORUS_CUDA_CHECK(cudaStreamWaitEvent(stream, st.last, 0));
  return ncclSuccess;
}

// Remembers the last launch on `stream` (outside graph capture), so destroy
// and abort can tell when the communicator's kernels are done and the next
// launch on another stream can wait for it.
ncclResult_t trackLaunch(CommState& st, cudaStream_t stream, bool inCapture) {
  unsigned long long id = 0;
  CHORUS_CUDA_CHECK(cudaStreamGetId(stream, &id));
  std::lock_guard<std::mutex> lock(st.launchMutex);
  cudaEvent_t& ev = st.inFlight[id];
  if (ev == nullptr) CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  if (inCapture) {
    // Event-record nodes: every replay of the graph records them, so destroy
    // and finalize also wait for kernels launched by graph replays, and the
    // next launch (eager or replayed) is ordered after this one.
    CHORUS_CUDA_CHECK(cudaEventRecordWithFlags(ev, stream, cudaEventRecordExternal));
    CHORUS_CUDA_CHECK(cudaEventRecordWithFlags(st.last, stream, cudaEventRecordExternal));
    st.captured = true;
    return ncclSuccess;
  }
  CHORUS_CUDA_CHECK(cudaEventRecord(ev, stream));
  CHORUS_CUDA_CHECK(cudaEventRecord(st.last, stream));
  st.lastStream = id;
  st.launchedBefore = true;
  return ncclSuccess;
}

// The call's tasks, for peers whose calls wait in setup (RecentCalls), with
// an event recorded after its kernels (none in a capture: every replay would
// record it). Not an error when an event cannot be had: the call then counts
// as finished.
void rememberCall(CommState& st, const Plan& plan, cudaStream_t stream, bool inCapture) {
  if (plan.stamps.empty()) return;
  std::vector<void*> forgotten;
  {
    // cudaEventQuery is refused (and invalidates the capture) while this
    // thread, or another in global mode, captures a graph (torch.cuda.graph).
    RelaxedCaptureScope relaxed;
    st.recentCalls.prune(markerFinished, &forgotten);
  }
  for (void* m : forgotten) st.spareMarkers.push_back(static_cast<cudaEvent_t>(m));
  cudaEvent_t done = nullptr;
  if (!inCapture && !st.spareMarkers.empty()) {
    done = st.spareMarkers.back();
    st.spareMarkers.pop_back();
  } else if (!inCapture && cudaEventCreateWithFlags(&done, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaGetLastError();
    done = nullptr;
  }
  if (done != nullptr && cudaEventRecord(done, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    st.spareMarkers.push_back(done);
    done = nullptr;
  }
  st.recentCalls.add(planTasks(plan), done);
}

ncclResult_t launchOne(Plan& plan, cudaStream_t stream) {
  ncclComm* comm = plan.comm;
  CommState& st = *comm->gpu;
  const DeviceForm* form = static_cast<const DeviceForm*>(plan.deviceForm.get());
  const bool inCapture = capturing(stream);
  CHORUS_CHECK(orderAfterPrevious(st, stream, inCapture));
  ncclResult_t res = ncclSuccess;
  OpPrint prints[dev::kLaunchMaxTasks];
  for (const LaunchArrays& la : form->launches) {
    dev::LaneLaunch L = launchHeader(plan, la, prints);
    L.abortFlag = st.abortDevice;
    L.status = st.statusDevice;
    L.waits = st.waitsDevice;
    L.timeoutNs = static_cast<uint64_t>(comm->config.timeoutMs) * 1000000ull;
    L.threads = st.threadsPerLane;
    // A direct reduction's launch (docs/wire.md) runs the wire kernel.
    const cudaError_t err = L.wire ? dev::launchWire(L, stream) : dev::launchLanes(L, stream);
    if (err != cudaSuccess) {
      res = fail(err == cudaErrorInvalidValue ? ncclInternalError : ncclUnhandledCudaError,
                 "rank %d: %s kernel launch (%d lanes, %d segments) failed: %s: %s", comm->id.rank,
                 L.wire ? "wire" : "lane", L.nLanes, L.nSegments, cudaGetErrorName(err), cudaGetErrorString(err));
      break;
    }
  }
  rememberCall(st, plan, stream, inCapture);
  // Tracked even after a failed launch: earlier launches of the plan may run.
  const ncclResult_t tracked = trackLaunch(st, stream, inCapture);
  return res != ncclSuccess ? res : tracked;
}

// Runs `body` on streams[0] after the work already queued on the other
// streams, and makes the others wait for it (a fork/join that is also valid
// inside a stream capture).
template <typename Body>
ncclResult_t onJoinedStreams(const std::vector<cudaStream_t>& streams, Body body) {
  if (streams.size() == 1) return body(streams[0]);
  cudaEvent_t ev = nullptr;
  CHORUS_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  std::unique_ptr<CUevent_st, void (*)(cudaEvent_t)> guard(ev, [](cudaEvent_t e) { (void)cudaEventDestroy(e); });
  for (size_t i = 1; i < streams.size(); ++i) {
    CHORUS_CUDA_CHECK(cudaEventRecord(ev, streams[i]));
    CHORUS_CUDA_CHECK(cudaStreamWaitEvent(streams[0], ev, 0));
  }
  CHORUS_CHECK(body(streams[0]));
  CHORUS_CUDA_CHECK(cudaEventRecord(ev, streams[0]));
  for (size_t i = 1; i < streams.size(); ++i) CHORUS_CUDA_CHECK(cudaStreamWaitEvent(streams[i], ev, 0));
  return ncclSuccess;
}

bool isLegacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

bool blocking(cudaStream_t s) {
  if (isLegacy(s)) return true;
  unsigned flags = 0;
  if (cudaStreamGetFlags(s, &flags) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return (flags & cudaStreamNonBlocking) == 0;
}

// Ranks of one GPU launched by this thread must not serialize
// (launch_policy.h has the rules).
ncclResult_t checkConcurrentStreams(std::span<Plan* const> plans, std::span<const std::vector<cudaStream_t>> streams) {
  std::vector<StreamUse> uses(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    uses[i].rank = plans[i]->comm->id.rank;
    uses[i].device = plans[i]->comm->gpu->device;
    for (cudaStream_t s : streams[i])
      uses[i].streams.push_back({reinterpret_cast<uintptr_t>(s), isLegacy(s), blocking(s)});
  }
  const std::string why = findSerializedRanks(uses);
  if (!why.empty()) return fail(ncclInvalidUsage, "%s", why.c_str());
  return ncclSuccess;
}

void warnLegacyStream(const ncclComm* comm, cudaStream_t stream) {
  if (stream != nullptr || comm->gpu->ranksOnDevice < 2) return;
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  CHORUS_WARN(kLogColl,
              "rank %d launches on the legacy default stream while %d ranks share GPU %d: kernels on that stream "
              "serialize with other work and ranks may wait for each other until CHORUS_TIMEOUT_MS; give each rank "
              "its own non-blocking stream",
              comm->id.rank, comm->gpu->ranksOnDevice, comm->gpu->device);
}

ncclResult_t launchRank(Plan& plan, const std::vector<cudaStream_t>& streams) {
  DeviceScope scope(plan.comm->gpu->device);
  CHORUS_CUDA_CHECK(scope.status());
  warnLegacyStream(plan.comm, streams[0]);
  return onJoinedStreams(streams, [&plan](cudaStream_t s) { return launchOne(plan, s); });
}

// A rank whose launch failed never joins its peers: the kernels of the ranks
// this thread launched before it, and those of its own launches that were
// queued before the one that failed, would wait forever (with no time limit
// by default). They are stopped, and the communicators carry the error.
// `launched` ends with the rank that failed.
void stopLaunched(std::span<Plan* const> launched, ncclResult_t res) {
  const std::string why = lastErrorMessage();
  for (Plan* p : launched) {
    commSignalAbort(p->comm);
    const bool failed = p == launched.back();
    commSetError(p->comm, res == ncclInvalidArgument ? ncclInvalidUsage : res,
                 "rank " + std::to_string(p->comm->id.rank) + "'s kernels were stopped: " +
                     (failed ? "its launch failed: " : "a rank launched with them in the same call failed: ") + why);
  }
}

}  // namespace

ncclResult_t launchPlans(std::span<Plan* const> plans, std::span<const std::vector<cudaStream_t>> streams) {
  if (plans.size() != streams.size())
    return fail(ncclInternalError, "launchPlans: %zu plans, %zu stream lists", plans.size(), streams.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i]->comm->gpu || streams[i].empty())
      return fail(ncclInternalError, "launchPlans: rank %d has no GPU state or no stream", plans[i]->comm->id.rank);
  }
  if (plans.size() > 1) CHORUS_CHECK(checkConcurrentStreams(plans, streams));
  // Translate (and allocate position counters for) every plan before the
  // first launch: nothing that might wait for the device runs between the
  // launches of ranks that wait for each other.
  for (Plan* plan : plans) {
    DeviceScope scope(plan->comm->gpu->device);
    CHORUS_CUDA_CHECK(scope.status());
    const DeviceForm* form = nullptr;
    CHORUS_CHECK(deviceFormOf(*plan, *plan->comm->gpu, &form));
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    const ncclResult_t res = launchRank(*plans[i], streams[i]);
    if (res != ncclSuccess) {
      stopLaunched(plans.first(i + 1), res);
      return res;
    }
  }
  return ncclSuccess;
}

}  // namespace chorus::gpu
