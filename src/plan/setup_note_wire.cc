#include "plan/setup_note_wire.h"

#include <algorithm>
#include <cstring>

#include "core/little_endian.h"

namespace chorus::opnote {
namespace {

constexpr uint64_t kMagic = 0x3230544f4e504fULL;  // "OPNOT02"
constexpr size_t kHeader = 16;
constexpr size_t kCounts = 16;
constexpr size_t kEntryBytes = 32;  // a task or a hop
static_assert(sizeof(OpPrint) + 8 == kEntryBytes);

std::vector<uint8_t> header(NoteKind kind, size_t entries, int rank, size_t body) {
  std::vector<uint8_t> b(kHeader + body, 0);
  storeLittleEndian(b.data(), kMagic, 8);
  b[8] = static_cast<uint8_t>(kind);
  b[9] = static_cast<uint8_t>(entries);
  storeLittleEndian(b.data() + 12, static_cast<uint32_t>(rank), 4);
  return b;
}

int loadInt(const uint8_t* at) { return static_cast<int32_t>(static_cast<uint32_t>(loadLittleEndian(at, 4))); }

void storeEntry(uint8_t* at, const OpPrint& print, int a, int b) {
  std::memcpy(at, &print, sizeof(OpPrint));
  storeLittleEndian(at + 24, static_cast<uint32_t>(a), 4);
  storeLittleEndian(at + 28, static_cast<uint32_t>(b), 4);
}

}  // namespace

std::vector<uint8_t> encodeOpsNote(int rank, const std::vector<CallTask>& tasks) {
  const size_t n = std::min(tasks.size(), kMaxEntries);
  std::vector<uint8_t> note = header(NoteKind::Ops, n, rank, kCounts + n * kEntryBytes);
  for (size_t i = 0; i < n; ++i)
    storeEntry(note.data() + kHeader + kCounts + i * kEntryBytes, tasks[i].print, tasks[i].peer, 0);
  return note;
}

void setNoteCounts(std::vector<uint8_t>* note, const PeerCounts& c) {
  uint8_t* at = note->data() + kHeader;
  storeLittleEndian(at, c.collectives, 4);
  storeLittleEndian(at + 4, c.sends, 4);
  storeLittleEndian(at + 8, c.receives, 4);
}

std::vector<uint8_t> encodeHopsNote(NoteKind kind, int rank, const std::vector<Hop>& hops) {
  const size_t n = std::min(hops.size(), kMaxEntries);
  std::vector<uint8_t> note = header(kind, n, rank, n * kEntryBytes);
  for (size_t i = 0; i < n; ++i)
    storeEntry(note.data() + kHeader + i * kEntryBytes, hops[i].send, hops[i].from, hops[i].to);
  return note;
}

std::vector<uint8_t> encodeVerdictNote(int rank, const OpMismatchRecord& r) {
  std::vector<uint8_t> note = header(NoteKind::Verdict, 0, rank, sizeof(r));
  std::memcpy(note.data() + kHeader, &r, sizeof(r));
  return note;
}

bool decodeSetupNote(const std::vector<uint8_t>& b, int from, SetupNote* note) {
  if (b.size() < kHeader || loadLittleEndian(b.data(), 8) != kMagic || loadInt(b.data() + 12) != from) return false;
  const size_t n = b[9];
  const uint8_t* body = b.data() + kHeader;
  *note = SetupNote{};
  note->rank = from;
  note->kind = static_cast<NoteKind>(b[8]);
  switch (note->kind) {
    case NoteKind::Ops:
      if (n > kMaxEntries || b.size() != kHeader + kCounts + n * kEntryBytes) return false;
      note->counts = {static_cast<uint32_t>(loadLittleEndian(body, 4)),
                      static_cast<uint32_t>(loadLittleEndian(body + 4, 4)),
                      static_cast<uint32_t>(loadLittleEndian(body + 8, 4))};
      note->tasks.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* at = body + kCounts + i * kEntryBytes;
        std::memcpy(&note->tasks[i].print, at, sizeof(OpPrint));
        note->tasks[i].peer = loadInt(at + 24);
      }
      return true;
    case NoteKind::Chain:
    case NoteKind::Waits:
      if (n == 0 || n > kMaxEntries || b.size() != kHeader + n * kEntryBytes) return false;
      note->hops.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* at = body + i * kEntryBytes;
        std::memcpy(&note->hops[i].send, at, sizeof(OpPrint));
        note->hops[i].from = loadInt(at + 24);
        note->hops[i].to = loadInt(at + 28);
      }
      return true;
    case NoteKind::Verdict:
      if (b.size() != kHeader + sizeof(OpMismatchRecord)) return false;
      std::memcpy(&note->verdict, body, sizeof(OpMismatchRecord));
      return true;
  }
  return false;
}

}  // namespace chorus::opnote
