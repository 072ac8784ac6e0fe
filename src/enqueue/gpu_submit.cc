#include "enqueue/gpu_submit.h"

#include <algorithm>
#include <string>

#include "core/comm.h"
#include "core/result.h"
#include "gpu/gpu_runtime.h"

namespace chorus {
namespace {

// A GPU-mode kernel dereferences the buffers it is given: a host pointer, or
// memory of another GPU (no peer mapping), would fault the whole CUDA
// context. Checked once per plan (plans are cached per buffer), not per call.
ncclResult_t checkReachable(const ncclComm* comm, const void* buf, size_t bytes, const char* what, const Task& t) {
  if (buf == nullptr || bytes == 0) return ncclSuccess;
  const std::string why = gpu::whyUnreachable(buf, comm->id.cudaDev);
  if (!why.empty())
    return fail(ncclInvalidArgument,
                "rank %d: %s %s=%p %s; GPU-mode communicators take cudaMalloc/ncclMemAlloc (or mapped pinned) buffers "
                "of their own GPU (CHORUS_MODE=host runs on host buffers)",
                comm->id.rank, collName(t.type), what, buf, why.c_str());
  return ncclSuccess;
}

// The error-feedback residual is a buffer the wire kernel reads and writes
// like the others (the plan cache keys on it too).
ncclResult_t checkBuffers(const Plan& plan) {
  for (const Task& t : plan.tasks) {
    const size_t bytes = t.count * typeSize(t.dtype);
    CHORUS_CHECK(checkReachable(plan.comm, t.sendbuff, bytes, "sendbuff", t));
    CHORUS_CHECK(checkReachable(plan.comm, t.recvbuff, bytes, "recvbuff", t));
    CHORUS_CHECK(checkReachable(plan.comm, t.wire.residual, t.count, "residual (error feedback)", t));
  }
  return ncclSuccess;
}

}  // namespace

std::vector<cudaStream_t> streamsOf(std::span<const Task> tasks) {
  std::vector<cudaStream_t> streams;
  for (const Task& t : tasks)
    if (std::find(streams.begin(), streams.end(), t.stream) == streams.end()) streams.push_back(t.stream);
  return streams;
}

ncclResult_t submitToGpu(std::span<Plan* const> plans, std::span<const std::vector<cudaStream_t>> streams) {
  ncclResult_t res = ncclSuccess;
  for (Plan* p : plans)
    if (!p->deviceForm && (res = checkBuffers(*p)) != ncclSuccess) break;
  if (res == ncclSuccess) res = gpu::launchPlans(plans, streams);
  if (res != ncclSuccess) {
    const std::string msg = lastErrorMessage();
    // Bad arguments leave the communicator usable; anything else is fatal.
    if (res != ncclInvalidArgument)
      for (Plan* p : plans) commSetError(p->comm, res, msg);
  }
  return res;
}

}  // namespace chorus
