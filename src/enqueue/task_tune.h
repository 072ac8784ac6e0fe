// The tuner (src/tune) applied to a Task: the adapter between the task the
// API queued and the tuner's (collective, bytes, communicator model) view.
// The tuner itself knows no tasks, so that it stays below the enqueue layer.
#pragma once

#include "core/comm_config.h"
#include "enqueue/task.h"
#include "graph/comm_graph.h"
#include "tune/tuner.h"

namespace chorus {

// The user's algorithm, protocol and channel knobs, as the tuner takes them.
TuneKnobs tuneKnobs(const CommConfig& cfg);

// Decision for one task; `graph` may be null (one host, rank order). The mode
// comes from task.comm (host mode when it is null).
ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, const graph::CommGraph* graph,
                      TuneDecision* out);

}  // namespace chorus
