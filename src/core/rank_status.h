// A rank's status as its process's mailbox thread tells it to peers (stall
// reports, docs/reliability.md): a waiting rank asks about a peer that sent
// no stall note, i.e. one that is not waiting in the library (it computes,
// is stuck elsewhere, or has not called yet). The answer comes from the
// communicator's activity record (core/op_activity.h), read by the mailbox
// thread, so the peer's own threads need not cooperate.
#pragma once

#include "core/stall_report.h"

struct ncclComm;

namespace chorus {

// Lets the process's mailbox answer status queries about this rank
// (withdrawn by ~ncclComm, before the activity record goes).
void publishRankStatus(ncclComm* comm);

// Asks rank `peer`'s mailbox, waiting at most `boundMs`: kAnswered with its
// status, kGone if its process cannot be reached or the connection broke,
// kNoAnswer if nothing came in time (e.g. it has destroyed the communicator).
PeerAnswer askRankStatus(ncclComm* comm, int peer, int64_t boundMs);

}  // namespace chorus
