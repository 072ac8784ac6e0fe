#include "core/stall_report.h"

#include <algorithm>
#include <cstdint>

#include "core/little_endian.h"

namespace chorus {
namespace {

constexpr uint64_t kNoteTag = 0x31544f4e4c415453ull;    // "STALNOT1"
constexpr uint64_t kStatusTag = 0x3154415453414b52ull;  // "RKSTAT1" + '1'

// Rounded to whole seconds; `ms` may be anything a peer's note said.
std::string seconds(int64_t ms) { return std::to_string(ms / 1000 + (ms % 1000 >= 500 ? 1 : 0)) + " s"; }

struct Groups {
  std::vector<int> waiting, absent;
  std::vector<std::string> elsewhere;  // ranks in another call, described
  int64_t longestMs = 0;
  int blocker = -1, blocked = -1;  // a waiting rank `blocked` that waits on an absent rank `blocker`
};

void classify(const StallPicture& p, int rank, const StallNote* n, Groups* g) {
  if (n == nullptr) {
    g->absent.push_back(rank);
    return;
  }
  if (n->inCall && n->collective == p.self.collective) {
    g->waiting.push_back(rank);
    g->longestMs = std::max(g->longestMs, n->waitedMs);
    return;
  }
  std::string what = "rank " + std::to_string(rank);
  if (!n->inCall)
    what += " is in no call (completed op #" + std::to_string(n->collDone) + ")";
  else
    what += " is in op #" + std::to_string(n->collective) + " (no progress for " + seconds(n->waitedMs) + ")";
  g->elsewhere.push_back(what);
}

void findBlocker(const StallPicture& p, Groups* g) {
  for (int r : g->waiting) {
    const StallNote& n = r == p.self.rank ? p.self : p.peers.at(r);
    if (n.waitedPeer >= 0 && std::find(g->absent.begin(), g->absent.end(), n.waitedPeer) != g->absent.end()) {
      g->blocked = r;
      g->blocker = n.waitedPeer;
      return;
    }
  }
}

// What an absent rank's process said about it.
std::string describeAnswer(int rank, const PeerAnswer& a) {
  const std::string who = "rank " + std::to_string(rank);
  if (a.kind == PeerAnswer::kGone) return who + " is gone (" + a.why + ")";
  const RankStatus& s = a.status;
  if (s.inCall)
    return who + " is in op #" + std::to_string(s.collStarted) + " but not waiting in it (its previous call returned " +
           seconds(s.sinceLastCallMs) + " ago)";
  return who + " last completed op #" + std::to_string(s.collDone) + " and has not called since " +
         seconds(s.sinceLastCallMs);
}

}  // namespace

std::vector<uint8_t> encodeStallNote(const StallNote& n) {
  std::vector<uint8_t> b(kStallNoteBytes, 0);
  storeLittleEndian(b.data(), kNoteTag, 8);
  storeLittleEndian(b.data() + 8, static_cast<uint32_t>(n.rank), 4);
  storeLittleEndian(b.data() + 12, static_cast<uint32_t>(n.waitedPeer), 4);
  storeLittleEndian(b.data() + 16, n.collective, 8);
  storeLittleEndian(b.data() + 24, n.collDone, 8);
  const uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(0, n.waitedMs));
  storeLittleEndian(b.data() + 32, std::min<uint64_t>(ms, 0xffffffffffffull), 6);
  b[38] = n.inCall ? 1 : 0;
  b[39] = n.receiving ? 1 : 0;
  return b;
}

bool decodeStallNote(const std::vector<uint8_t>& b, StallNote* n) {
  if (b.size() != kStallNoteBytes || loadLittleEndian(b.data(), 8) != kNoteTag || b[38] > 1 || b[39] > 1) return false;
  n->rank = static_cast<int32_t>(static_cast<uint32_t>(loadLittleEndian(b.data() + 8, 4)));
  n->waitedPeer = static_cast<int32_t>(static_cast<uint32_t>(loadLittleEndian(b.data() + 12, 4)));
  n->collective = loadLittleEndian(b.data() + 16, 8);
  n->collDone = loadLittleEndian(b.data() + 24, 8);
  n->waitedMs = static_cast<int64_t>(loadLittleEndian(b.data() + 32, 6));
  n->inCall = b[38] != 0;
  n->receiving = b[39] != 0;
  return true;
}

std::vector<uint8_t> encodeRankStatus(const RankStatus& s) {
  std::vector<uint8_t> b(kRankStatusBytes, 0);
  storeLittleEndian(b.data(), kStatusTag, 8);
  storeLittleEndian(b.data() + 8, static_cast<uint32_t>(s.rank), 4);
  b[12] = s.inCall ? 1 : 0;
  storeLittleEndian(b.data() + 16, s.collStarted, 8);
  storeLittleEndian(b.data() + 24, s.collDone, 8);
  storeLittleEndian(b.data() + 32, static_cast<uint64_t>(std::max<int64_t>(0, s.sinceLastCallMs)), 8);
  return b;
}

bool decodeRankStatus(const std::vector<uint8_t>& b, RankStatus* s) {
  if (b.size() != kRankStatusBytes || loadLittleEndian(b.data(), 8) != kStatusTag || b[12] > 1) return false;
  s->rank = static_cast<int32_t>(static_cast<uint32_t>(loadLittleEndian(b.data() + 8, 4)));
  s->inCall = b[12] != 0;
  s->collStarted = loadLittleEndian(b.data() + 16, 8);
  s->collDone = loadLittleEndian(b.data() + 24, 8);
  s->sinceLastCallMs = static_cast<int64_t>(std::min<uint64_t>(loadLittleEndian(b.data() + 32, 8), INT64_MAX));
  return true;
}

std::string formatRankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string formatStallLine(const StallPicture& p) {
  Groups g;
  for (int r = 0; r < p.nranks; ++r) {
    if (r == p.self.rank) {
      classify(p, r, &p.self, &g);
      continue;
    }
    auto it = p.peers.find(r);
    classify(p, r, it == p.peers.end() ? nullptr : &it->second, &g);
  }
  findBlocker(p, &g);
  std::string line = "op #" + std::to_string(p.self.collective) + " " + p.call + ": ";
  line += std::string(g.waiting.size() == 1 ? "rank " : "ranks ") + formatRankList(g.waiting) + " waiting (up to " +
          seconds(g.longestMs);
  if (g.blocked >= 0) line += ", rank " + std::to_string(g.blocked) + " on rank " + std::to_string(g.blocker);
  line += ")";
  for (const std::string& e : g.elsewhere) line += "; " + e;
  std::vector<int> silent;  // absent and not described by an answer
  for (int r : g.absent) {
    auto it = p.asked.find(r);
    if (it == p.asked.end() || it->second.kind == PeerAnswer::kNoAnswer)
      silent.push_back(r);
    else
      line += "; " + describeAnswer(r, it->second);
  }
  if (!silent.empty()) {
    line += std::string("; ") + (silent.size() == 1 ? "rank " : "ranks ") + formatRankList(silent) +
            (silent.size() == 1 ? " has" : " have") + " not called it (no note from " +
            (silent.size() == 1 ? "it" : "them") + "; this rank completed op #" + std::to_string(p.self.collDone) + ")";
  }
  return line;
}

}  // namespace chorus
