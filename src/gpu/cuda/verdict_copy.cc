// The host's share of spreading a verdict in GPU mode (docs/reliability.md,
// "Operation fingerprints"). The lane kernel leaves a mismatch it found or
// learned on the FIFOs of its own launch; a peer may instead wait on a
// connector of the communicator that launch did not use (another channel or
// protocol). So once a kernel of the communicator stopped with OpMismatch,
// the watchdog leaves the record on every connector end of the communicator,
// as spreadMismatch (src/plan/plan_verdict.cc) does in host mode, where the
// peers' waiting lanes read it (Waiter's slow path). GPU-mode FIFOs are
// device memory or mapped host memory, so the words are copied, on a stream
// of the watchdog's own (never the legacy stream, which could wait for the
// stuck kernels); a connector that already holds a verdict keeps it.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/comm.h"
#include "core/log.h"
#include "gpu/cuda/comm_state.h"
#include "gpu/cuda/cuda_util.h"
#include "gpu/gpu_runtime.h"
#include "kernels/common/step_rules.h"
#include "transport/connection_table.h"

namespace chorus::gpu {
namespace {

bool copied(cudaError_t e) {
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

// Writes `r` on one FIFO unless it holds a verdict; false if a copy failed.
// The same plain writes as a kernel's (setVerdict, lane_failure.cuh), in the
// same order and orientation: a kernel still running may write its record
// at the same time, and where both describe the same mismatch they hold the
// same bytes. Known limit: the read and the writes are not one atomic step
// (the FIFO may be device memory), so a kernel that leaves a different
// mismatch just after the read can lose it to this record; each rank still
// fails with a mismatch, one of the two.
bool leaveVerdict(FifoPrints* prints, const OpMismatchRecord& r, cudaStream_t s) {
  uint32_t verdict = kVerdictNone;
  if (!copied(cudaMemcpyAsync(&verdict, &prints->verdict, sizeof(verdict), cudaMemcpyDefault, s)) ||
      !copied(cudaStreamSynchronize(s)))
    return false;
  if (verdict != kVerdictNone) return true;
  static const uint32_t kWriting = kVerdictWriting, kValid = kVerdictValid;
  const OpMismatchRecord canonical = step::canonicalMismatch(r);
  return copied(cudaMemcpyAsync(&prints->verdict, &kWriting, sizeof(kWriting), cudaMemcpyDefault, s)) &&
         copied(cudaMemcpyAsync(&prints->mismatch, &canonical, sizeof(canonical), cudaMemcpyDefault, s)) &&
         copied(cudaMemcpyAsync(&prints->verdict, &kValid, sizeof(kValid), cudaMemcpyDefault, s)) &&
         copied(cudaStreamSynchronize(s));
}

}  // namespace

void spreadVerdict(ncclComm* comm, const OpMismatchRecord& r) {
  if (!comm->conns || !comm->gpu) return;
  // Also called by a user thread in connection setup: its current device may
  // be another, and its stream may be under capture.
  DeviceScope scope(comm->gpu->device);
  RelaxedCaptureScope relaxed;
  cudaStream_t s = nullptr;
  if (!copied(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) return;
  int failed = 0;
  comm->conns->forEachEnd([&](const FifoEnd& e) {
    if (e.ctl == nullptr) return;  // a sender still waiting in connection setup
    failed += leaveVerdict(&e.ctl->prints, r, s) ? 0 : 1;
  });
  (void)cudaStreamDestroy(s);
  if (failed > 0)
    CHORUS_INFO(kLogColl, "rank %d: could not leave the mismatch verdict on %d connector(s)", comm->id.rank, failed);
}

}  // namespace chorus::gpu
