// One collective call as a test case: buffers with guard zones, inputs from
// expected_values.h, the call itself, and a check of every output element,
// of inputs that must stay unchanged, and of the guard zones.
//
// A case is prepared, issued and verified in three steps so that group tests
// can issue several prepared cases between ncclGroupStart and ncclGroupEnd.
// Every rank of a communicator must run the same cases in the same order.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/expected_values.h"
#include "common/rank_runner.h"

namespace chorus::test {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, SendRecvRing };

const char* collName(Coll c);
const std::vector<Coll>& allColls();
bool collReduces(Coll c);
bool collHasRoot(Coll c);
bool collSupportsInPlace(Coll c);

struct Case {
  Coll coll = Coll::AllReduce;
  ncclDataType_t type = ncclFloat32;
  OpKind op = OpKind::Sum;  // reductions only
  size_t count = 0;         // NCCL's count argument (per rank for AllGather/ReduceScatter/...)
  bool inPlace = false;
  int root = 0;             // rooted collectives only
  size_t misalign = 0;      // bytes added to every buffer address
};

std::string describe(const Case& c, int nranks);

// Number of elements of `count` per rank that make about `bytes` of data in
// the largest buffer of `coll` (at least 1).
size_t countForBytes(Coll coll, ncclDataType_t type, int nranks, size_t bytes);

class PreparedCase {
 public:
  PreparedCase(RankCtx& ctx, ncclComm_t comm, const Case& c);
  ~PreparedCase();
  PreparedCase(const PreparedCase&) = delete;
  PreparedCase& operator=(const PreparedCase&) = delete;

  // Creates custom operators and fills / poisons the buffers. False on failure (recorded).
  bool prepare();
  // Makes the NCCL call(s). Inside a group this only enqueues.
  ncclResult_t issue();
  // Checks results, untouched inputs and guards. False on failure (recorded).
  bool verify();
  const Case& spec() const { return c_; }
  // True while every byte of an out-of-place recvbuff still holds the poison
  // (the call has not written anything yet).
  bool recvStillPoisoned() const;

 private:
  struct Buffers;
  bool createOp();
  void fillBuffers();
  // Compares n elements at base with expected(i); records one failure per call.
  bool checkRange(const char* what, const void* base, size_t n, const std::function<uint64_t(size_t)>& expected);
  uint64_t input(int rank, size_t index) const;  // what `rank` contributes at `index`
  uint64_t expectedOut(size_t index) const;      // recvbuff element `index` after the call
  size_t recvElems() const;

  RankCtx& ctx_;
  ncclComm_t comm_;
  Case c_;
  int rank_ = 0;
  int nranks_ = 1;
  size_t esize_ = 1;
  ncclRedOp_t op_ = ncclSum;
  bool customOp_ = false;
  uint64_t scalar_ = 0;  // the device-residence scalar lives here; read when the op runs
  std::unique_ptr<ReduceTables> tables_;  // reductions only
  std::unique_ptr<GuardedBuffer> send_, recv_;
  const void* sendPtr_ = nullptr;
  void* recvPtr_ = nullptr;
  GuardedBuffer* keep_ = nullptr;   // a buffer that must be unchanged by the call
  std::vector<uint8_t> keepCopy_;   // its contents before the call
};

// prepare + issue + verify; a failed call is recorded with the case description.
bool runCase(RankCtx& ctx, const Case& c);
bool runCase(RankCtx& ctx, ncclComm_t comm, const Case& c);

// Which cases to run for one collective.
struct Selection {
  std::vector<ncclDataType_t> types;
  std::vector<OpKind> ops;           // ignored for non-reducing collectives
  std::vector<size_t> counts;        // NCCL count arguments
  std::vector<bool> inPlace = {false, true};
};

// Runs the whole cross product (roots rotate with the case index). Returns
// the number of cases run.
int runSelection(RankCtx& ctx, Coll coll, const Selection& sel);

}  // namespace chorus::test
