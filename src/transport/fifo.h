// The connector: a single-producer/single-consumer FIFO of fixed-size slots
// plus two monotonically increasing counters, placed in memory that both the
// sender and the receiver can see (process heap for threads, a shared-memory
// segment for processes, device memory later). Transports differ only in
// where this memory comes from; the data path below is the same for all.
//
// Protocol (the counter rules are kernels/common/fifo_counters.h, shared with
// the network links and the kernels): the sender may fill slot
// (tail % nslots) while tail - head < nslots, writes the byte count into
// sizes[] and the fingerprint of the operation the slot belongs to into
// prints[] (src/core/op_fingerprint.h), then publishes with tail+1 (release).
// The receiver may read slot (head % nslots) while head < tail (acquire), and
// frees it with head+1 (release). Each side caches the other's counter and
// re-reads it only when the cached value says "full"/"empty", so in steady
// state the shared cache lines move once per slot, not once per poll.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/op_fingerprint.h"
#include "core/traffic_stats.h"
#include "kernels/common/direct_slot.h"
#include "kernels/common/fifo_counters.h"

namespace chorus {

inline constexpr uint64_t kFifoMagic = 0x43484f5255534649ull;  // "CHORUSFI"

// The fingerprint of the rooted collective a receiver is in, published when
// its plan starts: a sender whose call of the same number differs, and so
// never posts here, finds the mismatch although no slot flows (a gather whose
// ranks name different roots: the two roots each wait for the other;
// findStrayWait, plan_verdict.cc). One writer, the receiving end; `version`
// is odd while it writes, so a reader never takes half of two prints.
struct FifoIntent {
  alignas(64) std::atomic<uint32_t> version;
  uint32_t pad;
  uint64_t words[3];
};
static_assert(sizeof(OpPrint) == sizeof(FifoIntent::words), "an intent holds one OpPrint");

struct FifoControl {
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) uint64_t magic;
  uint32_t slotBytes;
  uint32_t nslots;
  int32_t receiverPid;
  int32_t senderPid;
  uint32_t sizes[kMaxFifoSlots];
  // The slots' fingerprints, and the verdict: set by either end that found
  // the two ends' calls do not match (or learned so from another connector),
  // read by the other end when it cannot make progress: a sender whose slots
  // were refused, a receiver whose sender stopped.
  FifoPrints prints;
  // The receiver's latest completed collective (its fingerprint number), set
  // when its plan finished: a broadcast or reduce sender that does not hear
  // back from this peer otherwise waits for it (plan_verdict.cc, awaitDone).
  alignas(64) std::atomic<uint64_t> doneSeq;
  // The same mark from the sender's side, set when a rooted plan finished: a
  // scatter's receivers wait for their root's (plan_verdict.cc, awaitRootDone).
  std::atomic<uint64_t> sentDoneSeq;
  // What the receiver waits for (fifoSetIntent, below).
  FifoIntent intent;
  // Slots the receiver has released, where that differs from `head` (a
  // network link frees a sender's slot once it is sent; FifoEnd::takenCounter).
  alignas(64) std::atomic<uint64_t> taken;
  // Per slot, for ends with a takenCounter: 1 if its sender's plan waits
  // until the receiver took it (Plan::unprovenSends), so the link asks the
  // receiver to ack it at once; 0 lets the receiver batch its acks.
  uint8_t senderWaits[kMaxFifoSlots];
};
static_assert(sizeof(FifoControl) <= 4096, "the FIFO control block is one page");

// Records a mismatch on the connector (first one wins).
inline void fifoSetMismatch(FifoControl* ctl, const OpMismatchRecord& r) {
  uint32_t expected = kVerdictNone;
  std::atomic_ref<uint32_t> verdict(ctl->prints.verdict);
  if (!verdict.compare_exchange_strong(expected, kVerdictWriting, std::memory_order_acq_rel)) return;
  ctl->prints.mismatch = r;
  verdict.store(kVerdictValid, std::memory_order_release);
}
// The mismatch recorded on the connector, if any.
inline bool fifoMismatch(FifoControl* ctl, OpMismatchRecord* r) {
  if (std::atomic_ref<uint32_t>(ctl->prints.verdict).load(std::memory_order_acquire) != kVerdictValid) return false;
  *r = ctl->prints.mismatch;
  return true;
}

inline void fifoSetIntent(FifoControl* ctl, const OpPrint& p) {
  uint64_t w[3];
  std::memcpy(w, &p, sizeof(w));
  const uint32_t v = ctl->intent.version.load(std::memory_order_relaxed);
  ctl->intent.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int i = 0; i < 3; ++i) std::atomic_ref<uint64_t>(ctl->intent.words[i]).store(w[i], std::memory_order_relaxed);
  ctl->intent.version.store(v + 2, std::memory_order_release);
}
// The receiver's intent; false while it is being written or was never set.
inline bool fifoIntent(FifoControl* ctl, OpPrint* p) {
  const uint32_t v = ctl->intent.version.load(std::memory_order_acquire);
  if (v == 0 || (v & 1) != 0) return false;
  uint64_t w[3];
  for (int i = 0; i < 3; ++i) w[i] = std::atomic_ref<uint64_t>(ctl->intent.words[i]).load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (ctl->intent.version.load(std::memory_order_relaxed) != v) return false;
  std::memcpy(p, w, sizeof(w));
  return true;
}

inline constexpr size_t fifoControlBytes() { return (sizeof(FifoControl) + 4095) & ~size_t(4095); }
inline size_t fifoTotalBytes(uint32_t slotBytes, uint32_t nslots) {
  return fifoControlBytes() + static_cast<size_t>(slotBytes) * nslots;
}

// Slots may also carry zero-copy descriptors: kernels/common/direct_slot.h.
static_assert(sizeof(DirectDescriptor) <= 4096, "a direct descriptor must fit the smallest slot");

// Writes a fresh control block at the start of `mem` (fifoTotalBytes large).
void fifoInit(void* mem, uint32_t slotBytes, uint32_t nslots, int receiverPid);

// Error state of a connector whose data is moved by someone else (the network
// proxy). Set once, by the mover; read by the executor while it waits, so a
// broken link becomes an error naming the peer instead of a timeout.
struct LinkHealth {
  std::atomic<int> state{0};  // 0 healthy, 1 being written, 2 failed (code and message valid)
  int code = 0;               // an ncclResult_t
  char message[512] = {0};
  // First failure wins; later ones are dropped.
  void setFailed(int errorCode, const char* text) {
    int expected = 0;
    if (!state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
    code = errorCode;
    snprintf(message, sizeof(message), "%s", text);
    state.store(2, std::memory_order_release);
  }
  bool failed() const { return state.load(std::memory_order_acquire) == 2; }
};

// Lets a sleeping mover (the network proxy) know that an end moved its
// counter. ring() costs one fence and one load while the mover is awake; only
// when it sleeps does ring() call wake (a futex/condvar wake-up).
struct Doorbell {
  std::atomic<bool> sleeping{false};
  void (*wake)(Doorbell*) = nullptr;
  void ring() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping.load(std::memory_order_relaxed)) wake(this);
  }
};

// Lets the thread that uses an end move the end's data itself instead of
// handing it to the mover's thread (a network link whose backend may be
// called from any thread: transports/net/net_link_inline.cc). move() does
// what can be done now without blocking, and wakes the mover's thread for
// what is left; it returns at once (false) when that thread holds the link.
// `waiting`: the end found nothing to take (a miss of ready() or drained())
// and wants what arrived; otherwise it published a counter (post, release,
// a mark), which needs passing on but no look for arrivals.
struct InlineMover {
  bool (*move)(InlineMover*, bool waiting) = nullptr;
  // For ends with sendsUserMemory: the operation failed and its buffers may
  // go away, so the link must not read user memory it was handed and has
  // not finished sending; a link that holds such slots fails (blocks only
  // while the proxy steps the link).
  void (*dropUserMemory)(InlineMover*) = nullptr;
  // For a thread that would otherwise yield while it waits on the end: steps
  // the link once more and, when that moved nothing, adds the descriptors
  // whose readiness means "move again" (pollfd entries). False when the link
  // cannot say (held by its mover's thread, still setting up, a backend
  // without descriptors, or something moved): the caller must not sleep on
  // descriptors alone then. `sleepNs`: how long the caller may sleep on them
  // (the link's mover thread leaves the link to it meanwhile).
  bool (*pollFds)(InlineMover*, std::vector<pollfd>* fds, int64_t sleepNs) = nullptr;
};

// Where a network receive end may put payloads straight into the
// application's buffer (FifoEnd::landings): the executor offers, per
// sequence number, the address its step will read the piece from; the link
// asks when the piece's first payload byte is read from the wire, and when
// it took the offer it publishes the slot with `landed` set (the slot then
// holds only the header). Entries are indexed by sequence % nslots and
// tagged with sequence + 1; the executor offers only sequences below its
// head + nslots, so an entry is never rewritten before its piece was taken.
struct LandingTable {
  struct Entry {
    std::atomic<uint64_t> seqPlusOne{0};
    uint64_t address = 0;
    uint64_t bytes = 0;
  };
  Entry entries[kMaxFifoSlots];
  uint8_t landed[kMaxFifoSlots] = {};  // per slot position, written by the link before it publishes the slot
};

// Shared by both connector ends: where the FIFO lives and who the peer is.
struct FifoEnd {
  FifoControl* ctl = nullptr;
  char* slots = nullptr;
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  // Bytes from one slot to the next; 0: slotBytes. The network transport
  // keeps a message header in front of each slot (transports/net/net_wire.h).
  uint32_t slotStride = 0;
  // Send ends: drained() waits for ctl->taken instead of ctl->head.
  bool takenCounter = false;
  int peer = -1;    // communicator rank on the other side
  int peerPid = 0;  // for liveness checks; 0 when the peer is this process
  // Send ends: the receiver can dereference this rank's buffer addresses
  // (same process; in GPU mode also the same GPU), so registered
  // buffers may be sent zero-copy (kDirectSlotMarker).
  bool peerReadsOurBuffers = false;
  // Send ends of network links that send straight from this rank's memory
  // (kUserMemorySlotMarker; step_rules.h's sendSource): a step that hands
  // them user memory waits until sent() before it ends, and a failed
  // operation calls its mover's dropUserMemory before it returns.
  bool sendsUserMemory = false;
  // Receive ends of network links that can land payloads in this rank's
  // memory (LandingTable); null elsewhere. A failed operation calls the
  // mover's dropUserMemory, as for sends.
  LandingTable* landings = nullptr;
  std::shared_ptr<void> memory;        // keeps the FIFO memory mapped while we use it
  std::shared_ptr<LinkHealth> health;  // set when a proxy moves the data (net); else null
  Doorbell* doorbell = nullptr;        // rung after post()/release() when a proxy moves the data
  // Set with `doorbell` where this end may move its data itself; then
  // post()/release() and a failed ready()/drained() call it instead of
  // ringing (valid while `memory` is held).
  InlineMover* mover = nullptr;
  // The communicator's counter of this end's direction and link
  // (core/traffic_stats.h); null for connectors no communicator counts.
  StatCounter* traffic = nullptr;
  char* slot(uint64_t index) const { return slotAt(static_cast<uint32_t>(index % nslots)); }
  // Slot `pos` (0 <= pos < nslots): what the connectors use, which keep their
  // position wrapped instead of dividing by nslots on every access.
  char* slotAt(uint32_t pos) const {
    return slots + pos * static_cast<size_t>(slotStride != 0 ? slotStride : slotBytes);
  }
};

// A waiting end asks its mover to move only on every kMoveEveryMiss-th check
// that found nothing: a move costs system calls, and a waiter that made one
// per check would spend its spin budget in the kernel, taking the core from
// the threads that move large messages.
inline constexpr uint32_t kMoveEveryMiss = 8;
inline bool moveOnMiss(const FifoEnd& end, uint32_t* misses) {
  return end.mover != nullptr && (++*misses % kMoveEveryMiss) == 1 && end.mover->move(end.mover, true);
}

// An end moved its counter: it moves the data itself where it may, else it
// lets the mover's thread know.
inline void endMoved(const FifoEnd& end) {
  if (end.mover != nullptr)
    end.mover->move(end.mover, false);
  else if (end.doorbell != nullptr)
    end.doorbell->ring();
}

// Whether the marks each end writes for the other reach it: the receiver's
// completion mark (FifoControl::doneSeq) and intent, the sender's completion
// mark (sentDoneSeq). The ends share the control block, or a framed network
// link carries them (net_wire.h: the receiver's in its acks, the sender's on
// a mark connection). Kernel-driven network links (GPU mode) carry none.
inline bool carriesMarks(const FifoEnd& end) { return !end.health || end.takenCounter; }

// A network send end with sendsUserMemory may be handed a piece in this
// rank's memory instead of a copy in the slot: the slot then holds a
// UserMemorySlot and its size is this marker. The link sends the slot's
// header and the bytes at `address` as one message, so the receiver gets an
// ordinary slot. The memory must stay unchanged until the send completed
// (head passes the slot: SendConnector::sent).
inline constexpr uint32_t kUserMemorySlotMarker = 0xFFFFFFFEu;
struct UserMemorySlot {
  uint64_t address;
  uint64_t bytes;
};

// The bytes a slot of `size` stands for: its size, for a zero-copy
// descriptor the whole step the receiver copies from the sender's buffer,
// for a user-memory slot the piece it points at.
inline uint64_t slotPayloadBytes(const char* slot, uint32_t size) {
  if (size == kDirectSlotMarker) return reinterpret_cast<const DirectDescriptor*>(slot)->bytes;
  if (size == kUserMemorySlotMarker) return reinterpret_cast<const UserMemorySlot*>(slot)->bytes;
  return size;
}

class SendConnector {
 public:
  explicit SendConnector(FifoEnd end) : end_(std::move(end)) {}
  bool ready() {
    if (fifo::slotFree(tail_, headCache_, end_.nslots)) return true;
    headCache_ = end_.ctl->head.load(std::memory_order_acquire);
    if (fifo::slotFree(tail_, headCache_, end_.nslots) || !moveOnMiss(end_, &misses_))
      return fifo::slotFree(tail_, headCache_, end_.nslots);
    headCache_ = end_.ctl->head.load(std::memory_order_acquire);
    return fifo::slotFree(tail_, headCache_, end_.nslots);
  }
  char* slot() const { return end_.slotAt(pos_); }
  void post(uint32_t bytes, const OpPrint& print = {}) {
    if (end_.traffic != nullptr) end_.traffic->add(slotPayloadBytes(slot(), bytes));
    end_.ctl->sizes[pos_] = bytes;
    end_.ctl->prints.slot[pos_] = print;
    if (end_.takenCounter) end_.ctl->senderWaits[pos_] = awaited_ ? 1 : 0;
    end_.ctl->tail.store(++tail_, std::memory_order_release);
    if (++pos_ == end_.nslots) pos_ = 0;
    endMoved(end_);
  }
  // The slot most recently posted (valid until the receiver frees it).
  char* lastPostedSlot() const { return end_.slot(tail_ - 1); }
  // Every posted slot has been taken by the receiver.
  bool drained() {
    if (fifo::allFreed(tail_, takenCache_)) return true;
    takenCache_ = (end_.takenCounter ? end_.ctl->taken : end_.ctl->head).load(std::memory_order_acquire);
    if (fifo::allFreed(tail_, takenCache_) || !moveOnMiss(end_, &misses_)) return fifo::allFreed(tail_, takenCache_);
    takenCache_ = (end_.takenCounter ? end_.ctl->taken : end_.ctl->head).load(std::memory_order_acquire);
    return fifo::allFreed(tail_, takenCache_);
  }
  // Every posted slot has left this rank (for a network link: its send
  // completed, whether or not the receiver acked it yet).
  bool sent() {
    if (fifo::allFreed(tail_, headCache_)) return true;
    headCache_ = end_.ctl->head.load(std::memory_order_acquire);
    if (fifo::allFreed(tail_, headCache_) || !moveOnMiss(end_, &misses_)) return fifo::allFreed(tail_, headCache_);
    headCache_ = end_.ctl->head.load(std::memory_order_acquire);
    return fifo::allFreed(tail_, headCache_);
  }
  // The operation failed: the link must not read user memory it still holds.
  void dropUserMemory() {
    if (end_.sendsUserMemory && end_.mover != nullptr && end_.mover->dropUserMemory != nullptr && !sent())
      end_.mover->dropUserMemory(end_.mover);
  }
  const FifoEnd& end() const { return end_; }
  // Whether the plan now posting waits until the receiver took its slots
  // (set per call by flagAwaitedSends; a link that acks lazily needs to know).
  void setAwaited(bool awaited) { awaited_ = awaited; }

 private:
  void moved() { endMoved(end_); }

  FifoEnd end_;
  uint64_t tail_ = 0;
  uint32_t pos_ = 0;  // tail_ % nslots
  uint64_t headCache_ = 0;
  uint64_t takenCache_ = 0;
  uint32_t misses_ = 0;  // checks that found nothing (moveOnMiss)
  bool awaited_ = true;  // until a plan says otherwise, every send is waited for
};

class RecvConnector {
 public:
  explicit RecvConnector(FifoEnd end) : end_(std::move(end)) {}
  bool ready() {
    if (fifo::slotPublished(head_, tailCache_)) return true;
    tailCache_ = end_.ctl->tail.load(std::memory_order_acquire);
    if (fifo::slotPublished(head_, tailCache_) || !moveOnMiss(end_, &misses_))
      return fifo::slotPublished(head_, tailCache_);
    tailCache_ = end_.ctl->tail.load(std::memory_order_acquire);
    return fifo::slotPublished(head_, tailCache_);
  }
  const char* slot() const { return end_.slotAt(pos_); }
  uint32_t size() const { return end_.ctl->sizes[pos_]; }
  const OpPrint& print() const { return end_.ctl->prints.slot[pos_]; }
  // The sequence number of the slot ready() looks at next.
  uint64_t head() const { return head_; }
  // Offers the link to land the piece of sequence `seq` (of `bytes`) at
  // `address` (LandingTable); only below head() + nslots.
  void offerLanding(uint64_t seq, const void* address, uint64_t bytes) {
    LandingTable::Entry& e = end_.landings->entries[seq % end_.nslots];
    if (e.seqPlusOne.load(std::memory_order_relaxed) == seq + 1) return;  // offered ahead, by the step before
    e.address = reinterpret_cast<uintptr_t>(address);
    e.bytes = bytes;
    e.seqPlusOne.store(seq + 1, std::memory_order_release);
  }
  // The ready slot's payload was landed where it was offered (not in slot()).
  bool landed() const { return end_.landings != nullptr && end_.landings->landed[pos_] != 0; }
  // Where the ready slot's payload was offered to land.
  const char* landedAt() const {
    return reinterpret_cast<const char*>(static_cast<uintptr_t>(end_.landings->entries[pos_].address));
  }
  void dropUserMemory() {
    if (end_.landings != nullptr && end_.mover != nullptr && end_.mover->dropUserMemory != nullptr)
      end_.mover->dropUserMemory(end_.mover);
  }
  void release() {
    if (end_.traffic != nullptr) end_.traffic->add(slotPayloadBytes(slot(), size()));
    end_.ctl->head.store(++head_, std::memory_order_release);
    if (++pos_ == end_.nslots) pos_ = 0;
    endMoved(end_);
  }
  const FifoEnd& end() const { return end_; }

 private:
  FifoEnd end_;
  uint64_t head_ = 0;
  uint32_t pos_ = 0;  // head_ % nslots
  uint64_t tailCache_ = 0;
  uint32_t misses_ = 0;  // checks that found nothing (moveOnMiss)
};

}  // namespace chorus
