// A GPU-mode rank whose call was enqueued judges a waiting peer's setup
// note against its recent calls (plan/setup_notes.h,
// readNotesAgainstLaunched, fed by gpu::RecentCalls from its watchdog): two
// ranks' bootstraps over one in-memory store, no GPU.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/mem_store.h"
#include "core/coll_types.h"
#include "core/comm.h"
#include "core/op_fingerprint.h"
#include "gpu/recent_calls.h"
#include "plan/setup_note_wire.h"
#include "plan/setup_notes.h"

namespace chorus {
namespace {

OpPrint allReduce(size_t count, uint32_t seq) {
  return makeOpPrint(CollType::AllReduce, count, ncclFloat32, ReduceKind::Sum, kNoRoot, seq);
}
OpPrint broadcast(size_t count, int root, uint32_t seq) {
  return makeOpPrint(CollType::Broadcast, count, ncclFloat32, ReduceKind::Sum, root, seq);
}

struct TwoRanks {
  std::shared_ptr<MemStore> store = std::make_shared<MemStore>();
  ncclComm comm[2];
  TwoRanks() {
    for (int r = 0; r < 2; ++r) {
      comm[r].id.rank = r;
      comm[r].id.nranks = 2;
      comm[r].id.hostMode = false;
      comm[r].bootstrap = std::make_unique<Bootstrap>(store, "notes/", r, 2);
    }
  }
  // Rank `from` sends a note of its call `tasks` to the other rank.
  void note(int from, const std::vector<CallTask>& tasks) {
    ASSERT_EQ(comm[from].bootstrap->send(1 - from, "opnote", opnote::encodeOpsNote(from, tasks)), ncclSuccess);
  }
  // The verdict note rank `at` received, if any.
  bool verdictAt(int at, OpMismatchRecord* r) {
    std::vector<uint8_t> bytes;
    bool got = false;
    if (comm[at].bootstrap->tryRecv(1 - at, "opnote", &bytes, &got) != ncclSuccess || !got) return false;
    opnote::SetupNote n;
    if (!opnote::decodeSetupNote(bytes, 1 - at, &n) || n.kind != opnote::NoteKind::Verdict) return false;
    *r = n.verdict;
    return true;
  }
};

TEST(LaunchedNotes, ANoteThatDisagreesWithALaunchedCallIsAMismatchAndTheVerdictGoesBack) {
  TwoRanks t;
  gpu::RecentCalls launched;
  launched.add({{allReduce(1000, 1), -1}}, nullptr);
  launched.add({{broadcast(1000, 0, 2), 0}}, nullptr);  // rank 1 enqueued op #2 as a Broadcast
  t.note(0, {{allReduce(1000, 2), -1}});                // rank 0 waits in setup for op #2, an AllReduce
  OpMismatchRecord r;
  bool self = false;
  ASSERT_TRUE(readNotesAgainstLaunched(&t.comm[1], launched.tasks(), &r, &self));
  EXPECT_TRUE(self);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.peer, 0);
  EXPECT_EQ(r.mine.coll, static_cast<uint8_t>(CollType::Broadcast));
  EXPECT_EQ(r.theirs.coll, static_cast<uint8_t>(CollType::AllReduce));
  EXPECT_EQ(r.mine.seq, 2u);
  char text[400];
  describeOpMismatch(r, text, sizeof(text));
  EXPECT_NE(std::string(text).find("op #2"), std::string::npos) << text;
  OpMismatchRecord back;
  ASSERT_TRUE(t.verdictAt(0, &back));  // the waiting rank learns it and stops too
  EXPECT_EQ(back.mine.coll, r.mine.coll);
  EXPECT_EQ(back.theirs.coll, r.theirs.coll);
}

TEST(LaunchedNotes, AMatchingOrLaterCallIsNotAMismatch) {
  TwoRanks t;
  gpu::RecentCalls launched;
  launched.add({{allReduce(1000, 1), -1}}, nullptr);
  t.note(0, {{allReduce(1000, 1), -1}});  // the same op #1
  t.note(0, {{broadcast(8, 0, 3), 0}});   // op #3: this rank has not called it yet
  OpMismatchRecord r;
  bool self = false;
  EXPECT_FALSE(readNotesAgainstLaunched(&t.comm[1], launched.tasks(), &r, &self));
  EXPECT_FALSE(t.verdictAt(0, &r));
}

TEST(LaunchedNotes, APeersVerdictIsTaken) {
  TwoRanks t;
  gpu::RecentCalls launched;
  launched.add({{allReduce(1000, 1), -1}}, nullptr);
  const OpMismatchRecord sent{allReduce(1000, 1), allReduce(2000, 1), 0, 1};
  ASSERT_EQ(t.comm[0].bootstrap->send(1, "opnote", opnote::encodeVerdictNote(0, sent)), ncclSuccess);
  OpMismatchRecord r;
  bool self = true;
  ASSERT_TRUE(readNotesAgainstLaunched(&t.comm[1], launched.tasks(), &r, &self));
  EXPECT_FALSE(self);
  EXPECT_EQ(r.theirs.count, 2000u);
}

TEST(LaunchedNotes, NothingIsJudgedBeforeAnyLaunch) {
  TwoRanks t;
  t.note(0, {{allReduce(1000, 1), -1}});
  OpMismatchRecord r;
  bool self = false;
  EXPECT_FALSE(readNotesAgainstLaunched(&t.comm[1], {}, &r, &self));
}

// Markers stand for the CUDA events: finished[i] for call i.
struct Markers {
  bool finished[2000] = {};
  void* of(size_t call) { return &finished[call]; }
  static bool done(void* m) { return *static_cast<bool*>(m); }
};

TEST(RecentCalls, FinishedCallsBeyondTheLatestFewAreForgotten) {
  Markers m;
  gpu::RecentCalls calls;
  std::vector<void*> forgotten;
  for (uint32_t seq = 1; seq <= 20; ++seq) {
    m.finished[seq] = true;
    calls.prune(Markers::done, &forgotten);
    calls.add({{allReduce(10, seq), -1}, {broadcast(10, 0, seq), 0}}, m.of(seq));
  }
  calls.prune(Markers::done, &forgotten);
  EXPECT_EQ(calls.size(), gpu::RecentCalls::kKeep);
  const std::vector<CallTask> all = calls.tasks();
  ASSERT_EQ(all.size(), 2 * gpu::RecentCalls::kKeep);
  EXPECT_EQ(all.front().print.seq, 20 - gpu::RecentCalls::kKeep + 1);  // oldest first
  EXPECT_EQ(all.back().print.seq, 20u);
  EXPECT_EQ(forgotten.size(), 20 - gpu::RecentCalls::kKeep);
  EXPECT_EQ(forgotten.front(), m.of(1));  // the markers come back for reuse
  EXPECT_EQ(calls.markers().size(), gpu::RecentCalls::kKeep);
}

TEST(RecentCalls, AStuckCallStaysHoweverManyCallsFollowIt) {
  Markers m;
  gpu::RecentCalls calls;
  std::vector<void*> forgotten;
  for (uint32_t seq = 1; seq <= 200; ++seq) {
    calls.prune(Markers::done, &forgotten);
    calls.add({{allReduce(10, seq), -1}}, m.of(seq));  // nothing finishes: #1 is stuck
  }
  calls.prune(Markers::done, &forgotten);
  EXPECT_EQ(calls.size(), 200u);
  EXPECT_EQ(calls.tasks().front().print.seq, 1u);
  // Once it finished (and everything behind it), the list shrinks again.
  for (size_t i = 1; i <= 200; ++i) m.finished[i] = true;
  calls.prune(Markers::done, &forgotten);
  EXPECT_EQ(calls.size(), gpu::RecentCalls::kKeep);
}

TEST(RecentCalls, NeverMoreThanTheCap) {
  gpu::RecentCalls calls;
  std::vector<void*> forgotten;
  bool never = false;
  for (uint32_t seq = 1; seq <= gpu::RecentCalls::kMaxCalls + 5; ++seq) {
    calls.add({{allReduce(10, seq), -1}}, &never);
    calls.prune(Markers::done, &forgotten);
  }
  EXPECT_EQ(calls.size(), gpu::RecentCalls::kMaxCalls);
  EXPECT_EQ(calls.tasks().front().print.seq, 6u);
  // Calls without a marker (captured into a graph) count as finished.
  gpu::RecentCalls captured;
  for (uint32_t seq = 1; seq <= 20; ++seq) captured.add({{allReduce(10, seq), -1}}, nullptr);
  captured.prune(Markers::done, &forgotten);
  EXPECT_EQ(captured.size(), gpu::RecentCalls::kKeep);
}

}  // namespace
}  // namespace chorus
