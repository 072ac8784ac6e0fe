#include "enqueue/setup_note_watch.h"

#include <algorithm>

#include "bootstrap/store.h"
#include "core/comm.h"
#include "core/result.h"
#include "gpu/gpu_runtime.h"
#include "plan/plan.h"
#include "plan/setup_notes.h"
#include "transport/connection_table.h"

namespace chorus {
namespace {
// GPU mode: the note goes out again after kFirstResend, then twice as long
// after each, at most a second apart (a peer that does not read them gets
// at most one a second).
constexpr std::chrono::milliseconds kLongestResend{1000};
}  // namespace

bool SetupNoteWatch::poll() {
  const auto now = Clock::now();
  if (found_ || now - last_ < kWaitSlice) return found_;
  last_ = now;
  bool self = false;
  found_ = readSetupNotes(plan_, &record_, &self);
  if (found_ && !self) stoppedToo_ = true;
  const ncclComm* comm = plan_.comm;
  if (!found_ && !comm->id.hostMode && now - lastSent_ >= resendAfter_) {
    lastSent_ = now;
    resendAfter_ = std::min(2 * resendAfter_, kLongestResend);
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
