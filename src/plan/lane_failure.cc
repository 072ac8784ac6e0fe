#include "plan/lane_failure.h"

#include <cstdio>

#include "core/result.h"

namespace chorus {
namespace {

constexpr const char* kMismatch = "mismatched counts, datatypes or call order between ranks";

const char* descriptorReason(step::DescriptorCheck why) {
  switch (why) {
    case step::DescriptorCheck::MidReceive:
      return "this rank was in the middle of a receive (the ranks split the data differently)";
    case step::DescriptorCheck::NotPlainReceive:
      return "this rank's step also sends or reduces";
    default:
      return nullptr;
  }
}

}  // namespace

ncclResult_t describeLaneFailure(const step::LaneFailure& f, int rank, int64_t timeoutMs, char* msg, size_t n) {
  const auto expected = static_cast<unsigned long long>(f.expected);
  switch (static_cast<step::LaneStatus>(f.status)) {
    case step::LaneStatus::Aborted:
      snprintf(msg, n, "rank %d: operation ended by ncclCommAbort (lane %d, waiting on peer rank %d)", rank, f.lane,
               f.peer);
      return ncclInvalidUsage;
    case step::LaneStatus::TimedOut:
      snprintf(msg, n,
               "rank %d: made no progress for %lld ms waiting on peer rank %d (lane %d, %s); the peer is stuck, dead "
               "or did not make the matching call (CHORUS_TIMEOUT_MS)",
               rank, static_cast<long long>(timeoutMs), f.peer, f.lane, f.detail ? "receiving" : "sending");
      return ncclRemoteError;
    case step::LaneStatus::SizeMismatch:
      if (f.detail == kDirectSlotMarker)
        snprintf(msg, n,
                 "rank %d: peer rank %d sent a zero-copy message where this rank expected a piece of %llu "
                 "bytes (lane %d): %s",
                 rank, f.peer, expected, f.lane, kMismatch);
      else
        snprintf(msg, n, "rank %d: peer rank %d sent a piece of %u bytes where %llu were expected (lane %d): %s", rank,
                 f.peer, f.detail, expected, f.lane, kMismatch);
      return ncclInvalidUsage;
    case step::LaneStatus::DescriptorMismatch: {
      const char* why = descriptorReason(static_cast<step::DescriptorCheck>(f.detail));
      char wanted[64];
      if (why == nullptr) {
        snprintf(wanted, sizeof(wanted), "%llu were expected", expected);
        why = wanted;
      }
      snprintf(msg, n, "rank %d: peer rank %d sent %llu bytes zero-copy where %s (lane %d): %s", rank, f.peer,
               static_cast<unsigned long long>(f.received), why, f.lane, kMismatch);
      return ncclInvalidUsage;
    }
    case step::LaneStatus::OpMismatch: {
      const int k = describeOpMismatch(f.mismatch, msg, n);
      // A rank that learned of the mismatch from a neighbour says so.
      if (rank != f.mismatch.rank && rank != f.mismatch.peer && k > 0 && static_cast<size_t>(k) < n)
        snprintf(msg + k, n - k, " (rank %d stopped too)", rank);
      return ncclInvalidUsage;
    }
    default:
      snprintf(msg, n, "rank %d: a lane reported unknown status %d", rank, f.status);
      return ncclInternalError;
  }
}

ncclResult_t laneFailureError(const step::LaneFailure& f, int rank, int64_t timeoutMs) {
  char msg[384];
  const ncclResult_t code = describeLaneFailure(f, rank, timeoutMs, msg, sizeof(msg));
  return fail(code, "%s", msg);
}

}  // namespace chorus
