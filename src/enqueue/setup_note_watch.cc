#include "enqueue/setup_note_watch.h"

#include "bootstrap/store.h"
#include "core/comm.h"
#include "core/result.h"
#include "gpu/gpu_runtime.h"
#include "plan/plan.h"
#include "plan/setup_notes.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {
constexpr std::chrono::milliseconds kResendEvery{250};
}  // namespace

bool SetupNoteWatch::poll() {
  const auto now = Clock::now();
  if (found_ || now - last_ < kWaitSlice) return found_;
  last_ = now;
  bool self = false;
  found_ = readSetupNotes(plan_, &record_, &self);
  if (found_ && !self) stoppedToo_ = true;
  const ncclComm* comm = plan_.comm;
  if (!found_ && !comm->id.hostMode && now - lastSent_ >= kResendEvery) {
    lastSent_ = now;
    sendSetupNotes(plan_, comm->conns->pendingPeers());
  }
  return found_;
}

ncclResult_t SetupNoteWatch::error() const {
  char text[400];
  describeOpMismatch(record_, text, sizeof(text));
  ncclComm* comm = plan_.comm;
  // GPU mode: connector ends may be device memory, written with a copy.
  if (comm->id.hostMode)
    spreadMismatch(plan_, record_);
  else
    gpu::spreadVerdict(comm, record_);
  const int rank = comm->id.rank;
  if (stoppedToo_ && record_.rank != rank)
    return fail(ncclInvalidUsage, "rank %d: %s (rank %d stopped too)", rank, text, record_.rank);
  return fail(ncclInvalidUsage, "rank %d: %s", rank, text);
}

}  // namespace chorus
