// What ranks send each other through the bootstrap besides connection
// handles of the network backends: the first input byte picks the parser,
// the rest is the message.
//   0  setup notes (src/plan/setup_note_wire.h): an accepted note re-encodes
//      to the same bytes; its fingerprints, hops and verdict are turned into
//      the text they end up in, and its tasks go through the checks a rank
//      runs on them (notesDisagree, firstUnmetNeed).
//   1  stall notes and 2 rank status answers (src/core/stall_report.h): an
//      accepted one re-encodes to the same bytes, and the WARN line built
//      from it names no rank outside the communicator it was put into.
//   3  the shm transport's handle, a segment path the sender opens and
//      unlinks (transports/shm/shm_leftovers.h: isSegmentPathOf).
//   4  the P2P transport's handle (transports/p2p/p2p_handle.h).
//   5  join records, which ranks leave in the job's store at init
//      (src/bootstrap/mesh_join.h): an accepted one re-encodes to the input.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/mesh_join.h"
#include "core/op_fingerprint.h"
#include "core/stall_report.h"
#include "fuzz_target.h"
#include "plan/setup_note_wire.h"
#include "plan/setup_notes.h"
#include "transport/fifo.h"
#include "transports/p2p/p2p_handle.h"
#include "transports/shm/shm_leftovers.h"

namespace chorus::fuzz {
namespace {

enum class Parser : uint8_t { SetupNote, StallNote, RankStatus, ShmHandle, P2pHandle, JoinRecord, Count };

constexpr int kFrom = 3;  // the rank a message comes from
constexpr int kSelf = 1;  // the rank reading it
constexpr int kRanks = 8;
constexpr int kShmOwner = 4242;

Bytes tagged(Parser p, const Bytes& body) {
  Bytes b(1 + body.size());
  b[0] = static_cast<uint8_t>(p);
  std::copy(body.begin(), body.end(), b.begin() + 1);
  return b;
}

template <class T>
void describe(const T& x, int (*fn)(const T&, char*, size_t)) {
  char text[512];
  const int n = fn(x, text, sizeof(text));
  fuzzCheck(n >= 0 && std::strlen(text) < sizeof(text), "a description fits");
}

Bytes reencode(const opnote::SetupNote& n) {
  switch (n.kind) {
    case opnote::NoteKind::Ops: {
      Bytes b = opnote::encodeOpsNote(n.rank, n.tasks);
      opnote::setNoteCounts(&b, n.counts);
      return b;
    }
    case opnote::NoteKind::Chain:
    case opnote::NoteKind::Waits:
      return opnote::encodeHopsNote(n.kind, n.rank, n.hops);
    case opnote::NoteKind::Verdict:
      return opnote::encodeVerdictNote(n.rank, n.verdict);
  }
  return {};
}

void setupNote(const Bytes& b) {
  opnote::SetupNote n;
  if (!opnote::decodeSetupNote(b, kFrom, &n)) return;
  fuzzCheck(n.rank == kFrom, "a note is from its sender");
  fuzzCheck(n.tasks.size() <= opnote::kMaxEntries && n.hops.size() <= opnote::kMaxEntries, "entries bounded");
  Bytes again = reencode(n);
  // Padding the encoder writes as zeros may carry anything on the wire.
  fuzzCheck(again.size() == b.size(), "a note re-encodes to its size");
  opnote::SetupNote n2;
  fuzzCheck(opnote::decodeSetupNote(again, kFrom, &n2) && reencode(n2) == again, "a note round-trips");
  if (n.kind == opnote::NoteKind::Verdict) describe(n.verdict, describeOpMismatch);
  if (n.kind == opnote::NoteKind::Chain || n.kind == opnote::NoteKind::Waits)
    fuzzCheck(!n.hops.empty(), "a chain has a hop");
  for (const opnote::Hop& h : n.hops) describe(h.send, describeOpPrint);
  const OpPrint mine = makeOpPrint(CollType::AllReduce, 1000, ncclFloat32, ReduceKind::Sum, -1, 5);
  for (const CallTask& t : n.tasks) {
    describe(t.print, describeOpPrint);
    if (notesDisagree(mine, -1, kSelf, t.print, t.peer, kFrom))
      describe(OpMismatchRecord{mine, t.print, kSelf, kFrom}, describeOpMismatch);
  }
  const int first = firstUnmetNeed(n.tasks, kFrom, kSelf, PeerCounts{4, 0, 0});
  fuzzCheck(first >= -1 && first < static_cast<int>(n.tasks.size()), "firstUnmetNeed names a task");
}

// A picture of a stalled AllReduce on kRanks ranks with one peer's note or answer.
void stallLine(const StallPicture& p) {
  const std::string line = formatStallLine(p);
  fuzzCheck(!line.empty(), "a stall line says something");
}

StallPicture picture() {
  StallPicture p;
  p.nranks = kRanks;
  p.self.rank = kSelf;
  p.self.inCall = true;
  p.self.collective = 7;
  p.self.collDone = 6;
  p.self.waitedMs = 61000;
  p.self.waitedPeer = kFrom;
  p.call = "AllReduce(1000 x float, sum)";
  return p;
}

void stallNote(const Bytes& b) {
  StallNote n;
  if (!decodeStallNote(b, &n)) return;
  fuzzCheck(encodeStallNote(n) == b, "a stall note round-trips");
  StallPicture p = picture();
  p.peers[kFrom] = n;
  stallLine(p);
}

void rankStatus(const Bytes& b) {
  RankStatus s;
  if (!decodeRankStatus(b, &s)) return;
  const Bytes again = encodeRankStatus(s);
  fuzzCheck(again.size() == b.size() && std::equal(b.begin(), b.begin() + 12, again.begin()), "a status round-trips");
  StallPicture p = picture();
  p.asked[kFrom] = PeerAnswer{PeerAnswer::kAnswered, s, ""};
  stallLine(p);
}

void shmHandle(const Bytes& b) {
  const std::string path(b.begin(), b.end());
  if (!isSegmentPathOf(path, kShmOwner)) return;
  const std::string name = path.substr(path.rfind('/') + 1);
  fuzzCheck(path.find('\0') == std::string::npos, "no NUL in an accepted path");
  fuzzCheck(name.rfind("chorus-" + std::to_string(kShmOwner) + "-p", 0) == 0, "the owner's segment name");
  fuzzCheck(name.find_first_not_of("chorus-0123456789p") == std::string::npos && name.find("..") == std::string::npos,
            "a segment name has no path in it");
}

ConnRequest p2pRequest() {
  ConnRequest req;
  req.selfRank = kSelf;
  req.peerRank = kFrom;
  req.slotBytes = 1 << 16;
  req.nslots = 8;
  req.label = "fuzz";
  return req;
}

void p2pHandle(const Bytes& b) {
  const ConnRequest req = p2pRequest();
  p2p::P2pHandle h;
  if (p2p::decodeP2pHandle(b, req, &h) != ncclSuccess) return;
  fuzzCheck(h.slotBytes == req.slotBytes && h.nslots == req.nslots, "an accepted handle has our geometry");
  fuzzCheck(std::memchr(h.busId, '\0', sizeof(h.busId)) != nullptr, "an accepted bus id is terminated");
}

void joinRecord(const Bytes& b) {
  chorus::JoinRecord r;
  if (decodeJoinRecord(b, &r) != ncclSuccess) return;
  fuzzCheck(r.mailbox.len <= sizeof(r.mailbox.storage), "an address inside its storage");
  fuzzCheck(encodeJoinRecord(r) == b, "a join record round-trips");
  fuzzCheck(!r.who().empty(), "a record describes its process");
}

}  // namespace

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  const OpPrint send = makeOpPrint(CollType::Send, 1000, ncclFloat32, ReduceKind::Sum, -1, 2);
  const OpPrint coll = makeOpPrint(CollType::AllReduce, 2000, ncclFloat32, ReduceKind::Sum, -1, 5);
  Bytes ops = opnote::encodeOpsNote(kFrom, {{coll, -1}, {send, kSelf}});
  opnote::setNoteCounts(&ops, PeerCounts{4, 1, 0});
  out.push_back(tagged(Parser::SetupNote, ops));
  out.push_back(tagged(Parser::SetupNote, opnote::encodeHopsNote(opnote::NoteKind::Chain, kFrom, {{send, 0, kFrom}})));
  out.push_back(tagged(Parser::SetupNote, opnote::encodeHopsNote(opnote::NoteKind::Waits, kFrom,
                                                                 {{send, 2, kFrom}, {send, kFrom, kSelf}})));
  OpMismatchRecord verdict{coll, send, kFrom, kSelf};
  verdict.mine.pad = kWaitCycleMark;
  out.push_back(tagged(Parser::SetupNote, opnote::encodeVerdictNote(kFrom, verdict)));
  StallNote note{kFrom, true, 7, 6, 64000, kSelf, true};
  out.push_back(tagged(Parser::StallNote, encodeStallNote(note)));
  out.push_back(tagged(Parser::RankStatus, encodeRankStatus(RankStatus{kFrom, false, 6, 6, 63000})));
  // Inputs libFuzzer found undefined behaviour with (now fixed): a peer that
  // has not called for INT64_MAX ms, a fingerprint whose datatype is no type.
  out.push_back(tagged(Parser::RankStatus, encodeRankStatus(RankStatus{kFrom, false, 6, 6, INT64_MAX})));
  OpMismatchRecord badType = verdict;
  badType.theirs.dtype = 135;
  out.push_back(tagged(Parser::SetupNote, opnote::encodeVerdictNote(kFrom, badType)));
  const std::string path = "/dev/shm/chorus-" + std::to_string(kShmOwner) + "-p4026531836-1-3-0";
  out.push_back(tagged(Parser::ShmHandle, Bytes(path.begin(), path.end())));
  p2p::P2pHandle h;
  h.slotBytes = 1 << 16;
  h.nslots = 8;
  h.totalBytes = fifoTotalBytes(h.slotBytes, h.nslots);
  h.device = 0;
  h.pointer = 0x7f0000000000;
  std::memcpy(h.busId, "0000:17:00.0", 13);
  Bytes hb;
  p2p::encodeP2pHandle(h, &hb);
  out.push_back(tagged(Parser::P2pHandle, hb));
  chorus::JoinRecord join;
  join.rank = 2;
  join.nranks = 8;
  join.pid = 4242;
  join.host = "node17";
  parseHostPort("127.0.0.1:29500", &join.mailbox);
  out.push_back(tagged(Parser::JoinRecord, encodeJoinRecord(join)));
  return out;
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus::fuzz;
  if (size == 0) return 0;
  const Bytes body(data + 1, data + size);
  switch (static_cast<Parser>(data[0] % static_cast<uint8_t>(Parser::Count))) {
    case Parser::SetupNote:
      setupNote(body);
      break;
    case Parser::StallNote:
      stallNote(body);
      break;
    case Parser::RankStatus:
      rankStatus(body);
      break;
    case Parser::ShmHandle:
      shmHandle(body);
      break;
    case Parser::P2pHandle:
      p2pHandle(body);
      break;
    case Parser::JoinRecord:
      joinRecord(body);
      break;
    case Parser::Count:
      break;
  }
  return 0;
}
