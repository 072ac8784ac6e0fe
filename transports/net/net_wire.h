// What the network transport itself puts in backend messages (host mode).
//
// Forward connection (sender -> receiver), in order:
//  1. one Hello: a SlotHeader (kind Hello) and the handle of the sender's
//     listener for the reverse connection;
//  2. one message per slot: the slot's SlotHeader (kind Slot, with the
//     fingerprint the executor stamped on it) directly followed by the
//     payload, so a slot and its fingerprint travel as one message. The
//     link's FIFO keeps kSlotHeaderBytes free in front of every slot
//     (FifoEnd::slotStride), so neither side copies;
//  3. at most one Verdict (SlotHeader + OpMismatchRecord): the sender's
//     rank found that the calls do not match; nothing useful follows.
// (A third connection, only between a scatter's root and its receivers, is
// described at MarkMessage below.)
// Reverse connection (receiver -> sender): Acks, each with the receiver's
// head (slots it has released), its completion mark (doneSeq), its intent
// (the rooted call it waits in) and, once, its verdict. The sender publishes the head as FifoControl::taken, which
// drained() waits for, so a send counts as taken only once the peer took it,
// as with shm, and the mark as its own control block's doneSeq. A slot
// whose sender waits for it says so (kSenderWaits) and is acked at once;
// other releases are acked in batches (net_link_side.cc, ackIsDue).
//
// Kernel-driven links (GPU mode) carry bare payloads and no reverse
// connection. All integers in host byte order (little-endian hosts).
#pragma once

#include <cstdint>

#include "chorus/net_plugin.h"
#include "core/op_fingerprint.h"

namespace chorus::netwire {

inline constexpr uint32_t kMagic = 0x5753454e;  // "NESW"
inline constexpr uint32_t kSlotHeaderBytes = 64;

enum class Kind : uint32_t { Hello = 1, Slot = 2, Verdict = 3, Mark = 4 };

// SlotHeader::flags
inline constexpr uint32_t kSenderWaits = 1;  // the sender waits until this slot is taken: ack it at once

struct SlotHeader {
  uint32_t magic;
  Kind kind;
  OpPrint print;   // Slot: the fingerprint of the slot's operation
  uint32_t flags;  // Slot: kSenderWaits or 0
  uint8_t reserved[kSlotHeaderBytes - 36];
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

struct Ack {
  uint32_t magic;
  uint32_t hasVerdict;
  uint64_t head;  // slots the receiver has released
  OpMismatchRecord verdict;
  uint64_t doneSeq;  // the receiver's FifoControl::doneSeq (its latest completed collective)
  uint32_t hasIntent;
  uint32_t hasMarkHandle;
  OpPrint intent;  // the receiver's FifoControl::intent (what its rooted call waits for)
  // Where the sender connects its mark connection (hasMarkHandle, once).
  uint8_t markHandle[CHORUS_NET_HANDLE_BYTES];
};

// Mark connection (sender -> receiver, set up on the first scatter): the
// sender's FifoControl::sentDoneSeq each time it grows, which becomes the
// receiver's (a scatter receiver waits for its root's mark; a message on the
// forward connection would take one of the receiver's slot receives).
struct MarkMessage {
  uint32_t magic;
  Kind kind;  // Mark
  uint64_t sentDoneSeq;
};

// The link's own small messages (not slots): registered once per connection.
struct SideBuffers {
  alignas(64) SlotHeader helloHeader;
  uint8_t helloHandle[CHORUS_NET_HANDLE_BYTES];
  alignas(64) SlotHeader verdictHeader;
  OpMismatchRecord verdictRecord;
  alignas(64) Ack ack;
  alignas(64) MarkMessage mark;                 // sender: the mark in flight; receiver: the one being received
  uint8_t markHandle[CHORUS_NET_HANDLE_BYTES];  // receiver: its mark listener; sender: the peer's
};
inline constexpr size_t kHelloBytes = kSlotHeaderBytes + CHORUS_NET_HANDLE_BYTES;
inline constexpr size_t kVerdictBytes = kSlotHeaderBytes + sizeof(OpMismatchRecord);
static_assert(offsetof(SideBuffers, helloHandle) == kSlotHeaderBytes);
static_assert(offsetof(SideBuffers, verdictRecord) - offsetof(SideBuffers, verdictHeader) == kSlotHeaderBytes);

// Checks a received forward message of `bytes` (network input): its kind,
// or nullptr-free error text in *why when it is malformed.
inline bool validSlotMessage(const SlotHeader& h, size_t bytes, const char** why) {
  if (bytes < kSlotHeaderBytes || h.magic != kMagic) {
    *why = "message without the transport's header (peer of another version?)";
    return false;
  }
  if (h.kind == Kind::Verdict && bytes != kVerdictBytes) {
    *why = "verdict message of the wrong size";
    return false;
  }
  if (h.kind != Kind::Slot && h.kind != Kind::Verdict) {
    *why = "message of an unknown kind";
    return false;
  }
  return true;
}

// The first message on the forward connection (network input).
inline bool validHello(const SlotHeader& h, size_t bytes) {
  return bytes == kHelloBytes && h.magic == kMagic && h.kind == Kind::Hello;
}

// An ack of `bytes` (network input) for a sender that has posted `posted`
// slots: the receiver cannot have released more than it was sent.
inline bool validAck(const Ack& a, size_t bytes, uint64_t posted) {
  return bytes == sizeof(Ack) && a.magic == kMagic && a.head <= posted;
}

// A message on the mark connection (network input).
inline bool validMark(const MarkMessage& m, size_t bytes) {
  return bytes == sizeof(MarkMessage) && m.magic == kMagic && m.kind == Kind::Mark;
}

}  // namespace chorus::netwire
