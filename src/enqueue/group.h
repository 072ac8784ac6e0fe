// Group semantics (ncclGroupStart/End) and the path every operation takes to
// an executor. Outside a group an operation runs as a group of one.
//
// Inside a group, operations are queued per thread; communicator creations
// are queued too. ncclGroupEnd first runs the queued creations (in parallel
// threads, since they rendezvous with each other), then builds one plan per
// communicator, connects every plan's receivers before any sender waits,
// and runs all plans together on this thread. That is what lets one thread
// drive all ranks of an ncclCommInitAll clique.
#pragma once

#include <functional>

#include "enqueue/task.h"

namespace chorus {

ncclResult_t groupStart();
ncclResult_t groupEnd();
// ncclGroupSimulateEnd: estimate (us) of the queued work from the cost model; discards it.
ncclResult_t groupSimulateEnd(float* estimatedUs);
bool inGroup();

// Queues or runs a validated task.
ncclResult_t enqueueTask(const Task& task);
// Queues (inside a group) or runs a communicator creation or finalize: work
// that rendezvouses with other ranks and so runs on its own thread at
// ncclGroupEnd. `uses`: the communicator it runs on; `finalize`: it is that
// communicator's finalize (groupDropComm).
ncclResult_t enqueueInit(const ncclComm* uses, bool finalize, std::function<ncclResult_t()> init);
// Records an error raised by a call inside the group (and its message, the
// last error's); ncclGroupEnd will return it.
void groupRecordError(ncclResult_t err);
// `comm` is being destroyed or aborted by `fn` while this thread's group is
// open: the operations the group queued on it are dropped (they would run on
// a freed communicator), and ncclGroupEnd fails without running the rest.
void groupDropComm(const ncclComm* comm, const char* fn);

}  // namespace chorus
