// The tuner (src/tune) applied to a Task: the adapter between the task the
// API queued and the tuner's (collective, bytes, communicator model) view.
// The tuner itself knows no tasks, so that it stays below the enqueue layer.
#pragma once

#include <vector>

#include "core/comm_config.h"
#include "enqueue/task.h"
#include "graph/comm_graph.h"
#include "tune/tuner.h"

namespace chorus {

struct PeerInfo;

// The user's algorithm, protocol and channel knobs, as the tuner takes them.
TuneKnobs tuneKnobs(const CommConfig& cfg);

// Whether, in GPU mode, some of a communicator's `peers` may connect through
// the network transport, whose proxy cannot forward LL: ranks on other hosts
// (by their own host hashes, which pick the transports, even where the graph
// was built as one host: CHORUS_GRAPH_FLAT), or, with shm off, ranks of
// several processes on one host (the P2P transport may still take some
// pairs). Such communicators give LL up, the same way on every rank, since
// all see the same peers and knobs.
bool peersBehindProxy(const std::vector<PeerInfo>& peers, bool shmOff);

// Decision for one task; `graph` may be null (one host, rank order). The mode
// comes from task.comm (host mode when it is null).
ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, const graph::CommGraph* graph,
                      TuneDecision* out);

}  // namespace chorus
