// Stall reports (docs/reliability.md, "Stall reports"): the note a waiting
// rank sends its peers, and the one WARN line each waiting rank prints from
// its own state and the notes it received. Pure functions: the executor
// (src/host/stall_watch.cc) moves the notes through the bootstrap.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace chorus {

// What one rank says about itself when an operation stalls.
struct StallNote {
  int32_t rank = -1;
  bool inCall = false;
  uint64_t collective = 0;  // number of the collective it is in (or last started)
  uint64_t collDone = 0;    // collectives it completed
  int64_t waitedMs = 0;     // how long it has made no progress
  int32_t waitedPeer = -1;  // the peer it waits on (-1: none known)
  bool receiving = false;   // waits to receive from waitedPeer (else to send)
};

inline constexpr size_t kStallNoteBytes = 40;
std::vector<uint8_t> encodeStallNote(const StallNote& n);
// False for bytes that are not a note (wrong size or tag).
bool decodeStallNote(const std::vector<uint8_t>& bytes, StallNote* n);

// What a rank's process says about the rank when a peer asks its mailbox
// (core/rank_status.h): answered by the mailbox thread, so also for a rank
// that is busy outside the library and sends no note.
struct RankStatus {
  int32_t rank = -1;
  bool inCall = false;
  uint64_t collStarted = 0;     // collectives it started
  uint64_t collDone = 0;        // collectives it completed
  int64_t sinceLastCallMs = 0;  // since its last call returned
};

inline constexpr size_t kRankStatusBytes = 40;
std::vector<uint8_t> encodeRankStatus(const RankStatus& s);
bool decodeRankStatus(const std::vector<uint8_t>& bytes, RankStatus* s);

// The answer to a status query about one rank that sent no note.
struct PeerAnswer {
  enum Kind { kNoAnswer, kAnswered, kGone } kind = kNoAnswer;
  RankStatus status;  // kAnswered
  std::string why;    // kGone, kNoAnswer: what the query ran into
};

// "0-2,4-7" for {0,1,2,4,5,6,7}; `ranks` sorted ascending.
std::string formatRankList(const std::vector<int>& ranks);

struct StallPicture {
  int nranks = 0;
  StallNote self;
  std::string call;                 // the call this rank waits in, described (describeCall)
  std::map<int, StallNote> peers;   // the latest note of each peer that sent one
  std::map<int, PeerAnswer> asked;  // what peers without a note said when asked
};

// The one line: "op #1043 AllReduce(...): ranks 0-2,4-7 waiting (up to 63 s, rank 4 on rank 3);
// rank 3 last completed op #1042 and has not called since 63 s"; a rank
// without a note and without an answer "has not called it (no note from it)".
std::string formatStallLine(const StallPicture& p);

}  // namespace chorus
