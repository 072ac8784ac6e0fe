// Setup notes: how ranks whose calls differ find out while lazy connection
// setup would make them wait for each other forever (docs/reliability.md,
// "Operation fingerprints"). A mismatched first call may need connectors the
// other rank never creates (AllReduce on one rank, Broadcast on the other),
// so no slot, and no fingerprint on it, ever flows. Instead a plan that made
// connectors sends its fingerprints, with its operation counters towards the
// recipient, to the ranks it waits on for receiver handles and (host mode)
// to those it announced receivers to, as a bootstrap message (tag "opnote");
// a rank reading such a note compares it with its own call, task by task
// with the same number, and checks whether the two calls wait for each other
// whatever their numbers (plan/blocked_calls.h); on a mismatch it fails and
// sends the verdict to every rank (the bytes: plan/setup_note_wire.h). A rank reads notes while it waits in
// setup (about every 50 ms) and in the executor's idle checks. Matching
// calls cost one small message per new peer, once, at setup. Ranks whose
// calls are sends only pass on chains of such waits (chain notes), so a
// cycle of sends longer than two ranks is found too.
#pragma once

#include <vector>

#include "core/op_fingerprint.h"
#include "plan/blocked_calls.h"

struct ncclComm;

namespace chorus {

struct Plan;

// Sends the plan's fingerprints and counters to each rank in `peers`.
void sendSetupNotes(const Plan& plan, const std::vector<int>& peers);

// Reads every note that has arrived; true with *r on a mismatch between a
// peer's note and the plan's tasks (then the verdict goes to every peer), or
// on a verdict a peer sent. *selfFound says which.
bool readSetupNotes(const Plan& plan, OpMismatchRecord* r, bool* selfFound);

// GPU mode, from the watchdog while the communicator's kernels run (its
// calls returned once enqueued, so it waits in no setup): reads the notes
// that arrived and judges each task of a peer's call against `launched`,
// the tasks of this rank's recent calls (notesDisagree: the same number,
// different operations). True with *r on such a task (the verdict then goes
// to every peer; *selfFound) or on a peer's verdict. Notes of other kinds
// concern ranks that wait in setup and are dropped; a waiting GPU-mode rank
// sends its note again (enqueue/setup_note_watch.h).
bool readNotesAgainstLaunched(ncclComm* comm, const std::vector<CallTask>& launched, OpMismatchRecord* r,
                              bool* selfFound);

// The plan's tasks as notes carry them (fingerprint, and the peer of a
// Send/Recv).
std::vector<CallTask> planTasks(const Plan& plan);

// Sends a mismatch this rank found (by any means) to every peer as a note.
void sendVerdictNotes(const Plan& plan, const OpMismatchRecord& r);

// The mismatch between this rank's task `mine` (with `minePeer`: the peer of
// a Send/Recv) and a task of rank `peer`'s call (`theirs`, whose
// Send/Recv peer is `theirPeer`), if they are the same operation (same
// number, a collective on both or a Send matched with a Recv) that differs.
bool notesDisagree(const OpPrint& mine, int minePeer, int self, const OpPrint& theirs, int theirPeer, int peer);

}  // namespace chorus
