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

// What a rank says about itself when it joins (in the job's store, where
// the other ranks read it): bytes from another process, decoded with checks.
struct JoinRecord {
  int rank = 0;
  int nranks = 0;
  int pid = 0;
  std::string host;
  SockAddr mailbox;

  std::string who() const { return "pid " + std::to_string(pid) + " on host " + host; }
};
std::vector<uint8_t> encodeJoinRecord(const JoinRecord& r);
// ncclInternalError for bytes too short, or an address longer than a SockAddr holds.
ncclResult_t decodeJoinRecord(const std::vector<uint8_t>& in, JoinRecord* r);

// On success mailboxes[r] is rank r's mailbox. A rank claimed twice, or ranks
// disagreeing on nranks, fail every rank that joined with ncclInvalidUsage
// and one message naming the conflict.
ncclResult_t joinJob(Store& job, const std::string& prefix, int rank, int nranks, Mesh& mesh, const WaitBound& bound,
                     std::vector<SockAddr>* mailboxes);

}  // namespace chorus
