// The bytes of a setup note (plan/setup_notes.h), the bootstrap message
// (tag "opnote") ranks send each other about their calls while connection
// setup would make them wait. Pure functions, so the decoder can be fuzzed
// (tests/fuzz/bootstrap_notes_fuzz.cc): a note comes from another process
// and is checked for its size, magic and sender before anything is read.
//
// Layout (little-endian header; fingerprints as OpPrint bytes, the layout
// every rank of a job shares, as in the slot headers):
//   0  magic "OPNOT02" (8)   8 kind (1)   9 entries (1)   12 sender rank (4)
//   Ops:     16 counts towards the recipient (collectives, sends, receives,
//            4 each; 4 padding), then per task: OpPrint (24), peer (4), 4 pad
//   Chain, Waits: per hop: OpPrint (24), from (4), to (4)
//   Verdict: OpMismatchRecord (56)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/op_fingerprint.h"
#include "plan/blocked_calls.h"

namespace chorus::opnote {

enum class NoteKind : uint8_t { Ops = 1, Verdict = 2, Chain = 3, Waits = 4 };

// A note names at most this many tasks or hops (a large group's first ones).
inline constexpr size_t kMaxEntries = 64;

// One edge of a chain: rank `from`'s task `send` waits for rank `to`.
struct Hop {
  OpPrint send;
  int from = -1;
  int to = -1;
};

struct SetupNote {
  NoteKind kind = NoteKind::Ops;
  int rank = -1;                // the sender
  PeerCounts counts;            // Ops: the sender's counts towards the recipient
  std::vector<CallTask> tasks;  // Ops
  std::vector<Hop> hops;        // Chain, Waits: at least one
  OpMismatchRecord verdict;     // Verdict
};

// An Ops note of the first kMaxEntries of `tasks`, with zero counts:
// setNoteCounts fills them in per recipient.
std::vector<uint8_t> encodeOpsNote(int rank, const std::vector<CallTask>& tasks);
void setNoteCounts(std::vector<uint8_t>* note, const PeerCounts& counts);
// A Chain or Waits note of the first kMaxEntries hops.
std::vector<uint8_t> encodeHopsNote(NoteKind kind, int rank, const std::vector<Hop>& hops);
std::vector<uint8_t> encodeVerdictNote(int rank, const OpMismatchRecord& r);

// False for bytes that are not a well-formed note sent by rank `from`.
bool decodeSetupNote(const std::vector<uint8_t>& bytes, int from, SetupNote* note);

}  // namespace chorus::opnote
