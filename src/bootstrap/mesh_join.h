// Joining a job at ncclCommInitRank (README.md, "Init"): every rank claims
// its rank in the job's store, the claims and the ranks' nranks are checked,
// and each rank then learns every rank's mailbox over the mesh (pointer
// doubling from its ring neighbour, then an all-gather: log2(n) rounds). The
// job's store serves a constant number of requests per rank (linear in the
// rank count), and nothing after this touches it.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/mesh.h"
#include "bootstrap/store.h"

namespace chorus {

// On success mailboxes[r] is rank r's mailbox. A rank claimed twice, or ranks
// disagreeing on nranks, fail every rank that joined with ncclInvalidUsage
// and one message naming the conflict.
ncclResult_t joinJob(Store& job, const std::string& prefix, int rank, int nranks, Mesh& mesh, const WaitBound& bound,
                     std::vector<SockAddr>* mailboxes);

}  // namespace chorus
