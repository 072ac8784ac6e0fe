// One network connector as the proxy thread sees it: the local FIFO, the
// backend connection that feeds or drains it, and the requests in flight.
//
// Sender link: slots [completed, posted) are in backend isends; slots
// [posted, tail) are filled by the executor but not yet handed to the
// backend. A finished isend frees its slot (head = completed).
// Receiver link: slots [completed, posted) have irecvs posted; a finished
// irecv publishes the slot (sizes[], tail = completed). Both run in order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <poll.h>
#include <unistd.h>

#include "chorus/net_plugin.h"
#include "transport/fifo.h"
#include "transports/net/net_user_memory.h"
#include "transports/net/net_wire.h"

namespace chorus {

struct NetLink {
  NetLink(bool isSender, const chorusNet_v1_t* backend, std::string what)
      : sender(isSender), net(backend), label(std::move(what)) {}
  ~NetLink() {
    if (dmabufFd >= 0) close(dmabufFd);  // exported, never registered (setup failed)
  }
  NetLink(const NetLink&) = delete;
  NetLink& operator=(const NetLink&) = delete;

  const bool sender;
  const chorusNet_v1_t* const net;
  const std::string label;  // "comm .. ring ch0 1->2 via Socket/lo"

  void* listenComm = nullptr;  // receiver, until accepted
  void* comm = nullptr;        // backend send or receive connection
  void* mhandle = nullptr;     // registration of the slots
  std::shared_ptr<void> fifo;  // control block + slots (heap)
  FifoControl* ctl = nullptr;
  char* slots = nullptr;  // payload of slot 0 (framed: after its header)
  // GPUDirect RDMA (net_slot_placement.h): the slots live in device memory
  // (held here), registered as memory of this type with regMr, or with
  // regMrDmaBuf when dmabufFd >= 0 (closed once registered).
  std::shared_ptr<void> deviceSlots;
  int slotPtrType = CHORUS_NET_PTR_HOST;
  int dmabufFd = -1;
  uint64_t dmabufOffset = 0;
  // The backend also takes CUDA pointers by regMr: when exporting or
  // registering the dma-buf fails, the slots are registered that way instead.
  bool regMrFallback = false;
  // Sender, host mode: the backend's gathering send (net_user_memory.h), with
  // which slots holding a UserMemorySlot go out from the application's
  // memory (FifoEnd::sendsUserMemory); null: never handed user memory.
  NetGatherSendFn gatherSend = nullptr;
  // Receiver, host mode: the backend's landing receive and the table where
  // the executor offers its output addresses (FifoEnd::landings); per slot,
  // the question a receive asks (net_link.cc's landPiece) and whether the
  // receive in flight took the offer. Under moveMu.
  struct LandingAsk {
    NetLink* link;
    uint64_t seq;
  };
  NetLandingRecvFn landingRecv = nullptr;
  std::unique_ptr<LandingTable> landings;
  bool landingsDropped = false;  // a failed operation: nothing lands in user memory any more
  LandingAsk landingAsks[kMaxFifoSlots] = {};
  bool landedInUser[kMaxFifoSlots] = {};
  // Receiver: a received slot is published only after iflush completed, so
  // a kernel never reads device memory the NIC may still be writing.
  bool flushAfterRecv = false;
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  int dev = 0;  // backend device (the reverse connection uses the same)
  std::shared_ptr<LinkHealth> health = std::make_shared<LinkHealth>();
  std::atomic<bool> retired{false};  // the executor dropped its end
  uint64_t id = 0;                   // set by the proxy at attach
  bool closed = false;               // backend connections closed (under the proxy's lock)
  // GPU mode: a kernel moves the FIFO counters and cannot ring the doorbell,
  // so the proxy keeps polling the link (sleeps bounded by CHORUS_NET_POLL_MAX_US).
  bool kernelDriven = false;
  bool coresShared = false;  // ConnRequest::coresShared: the proxy looks at it as often as ever
  int64_t waitLimitMs = 0;   // the communicator's CHORUS_TIMEOUT_MS (0: no limit)
  int64_t ackDelayUs = 0;    // receiver: CHORUS_NET_ACK_DELAY_US when the link was made
  // Host mode: slots travel with their fingerprints, and a reverse
  // connection brings the receiver's head and verdict back (net_wire.h).
  bool framed() const { return !kernelDriven; }
  uint32_t stride() const { return slotBytes + (framed() ? netwire::kSlotHeaderBytes : 0); }

  // Inline moves (net_link_inline.cc): the executor's thread may step the
  // link itself. Every step (proxy or executor) holds moveMu; the proxy's
  // state below and the backend connections are touched only under it.
  struct Mover : InlineMover {
    NetLink* link = nullptr;
  };
  std::mutex moveMu;
  Mover mover;
  bool movable = true;  // under moveMu: false once the proxy closed the link
  // When the executor last stepped the link (steady clock, ns), or until when
  // it sleeps on the link's descriptors (pollFdsInline: ahead of the clock):
  // while it is that recent the executor is waiting on the link and moves
  // what arrives, so the proxy does not wake for the link's descriptors.
  std::atomic<int64_t> inlineAtNs{0};
  // Set by an inline step that left the proxy work (or found the link held):
  // the proxy steps the link on its next pass even while the executor is there.
  std::atomic<bool> proxyWanted{false};
  bool movesInline() const { return mover.move != nullptr; }
  // The steady clock in ns (inlineAtNs, ackDueNs).
  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // The executor stepped the link since `sinceNs` (and is likely to again).
  bool executorPresent(int64_t sinceNs) const {
    return movesInline() && inlineAtNs.load(std::memory_order_relaxed) >= sinceNs;
  }

  // Link state (under moveMu).
  uint64_t posted = 0;
  uint64_t completed = 0;
  void* requests[kMaxFifoSlots] = {};
  void* flushReq = nullptr;  // receiver: the flush of slot `completed` in flight
  size_t landedBytes = 0;    // receiver: slot `completed`'s size, while its flush runs
  bool failed = false;
  bool draining = false;
  std::chrono::steady_clock::time_point drainDeadline{};

  // Framed links: the reverse connection and the link's own messages.
  std::unique_ptr<netwire::SideBuffers> side = std::make_unique<netwire::SideBuffers>();
  void* sideMh = nullptr;     // side buffers registered on `comm`
  void* revListen = nullptr;  // sender: listener for the reverse connection
  void* revComm = nullptr;    // sender: receive end; receiver: send end
  void* revSideMh = nullptr;  // side buffers registered on `revComm`
  void* helloReq = nullptr;
  bool helloPosted = false;   // sender: isend posted; receiver: irecv posted
  bool helloDone = false;     // sender: sent; receiver: received
  void* ackReq = nullptr;     // sender: the posted irecv; receiver: the isend in flight
  uint64_t remoteHead = 0;    // sender: the receiver's head as last acked
  uint64_t ackedHead = 0;     // receiver: head in the last ack posted
  uint64_t ackInFlight = 0;   // receiver: head carried by ackReq
  uint64_t ackedDone = 0;     // receiver: doneSeq in the last ack posted
  uint64_t doneInFlight = 0;  // receiver: doneSeq carried by ackReq
  OpPrint intentInFlight{};   // receiver: the latest intent given to an ack
  // The mark connection (net_link_marks.cc), set up on the first scatter.
  bool markWanted = false;        // receiver: a scatter slot arrived: listen
  bool markHandleToSend = false;  // receiver: listening, the handle not yet in an ack
  bool markHandleKnown = false;   // sender: the receiver's handle came in an ack
  bool markGone = false;          // failed or closed: root marks count as given
  void* markListen = nullptr;     // receiver, until accepted
  void* markComm = nullptr;       // sender: send end; receiver: receive end
  void* markMh = nullptr;         // side buffers registered on markComm
  void* markReq = nullptr;        // sender: the isend in flight; receiver: the irecv posted
  uint64_t markSent = 0;          // sender: sentDoneSeq in the last mark posted
  bool reverseGone = false;       // the reverse connection closed or broke
  bool verdictPosted = false;
  void* verdictReq = nullptr;
  bool verdictAcked = false;     // receiver: the verdict went back
  bool verdictSeen = false;      // receiver: the sender's verdict arrived; nothing useful follows
  bool senderWaits = false;      // receiver: the last slot received asked for a prompt ack
  bool lastSentAwaited = false;  // sender: the last slot sent asked for a prompt ack
  bool inlineStep = false;       // the executor's thread is stepping the link (net_link_inline.cc)
  // That step only passes on what the executor published (a release, a
  // mark) while receives were pending: a receiver posts and acks, but does
  // not look for arrivals.
  bool publishOnly = false;
  int64_t ackPolledNs = 0;  // sender: when an inline step last looked for an ack
  // Receiver: when a change held back for a batch must be acked (steady
  // clock, ns; 0: nothing held back). Read by the sleeping proxy.
  std::atomic<int64_t> ackDueNs{0};

  char* slot(uint64_t index) const { return slots + (index % nslots) * static_cast<size_t>(stride()); }
  // Where slot `index`'s message starts (framed: its header).
  char* message(uint64_t index) const { return slot(index) - (framed() ? netwire::kSlotHeaderBytes : 0); }
};

// Moves what can be moved now without waiting. *progressed: something moved;
// *busy: requests are in flight (worth polling again soon).
void stepLink(NetLink& link, bool* progressed, bool* busy);
// Whether a retired link may be closed now (a sender first drains what the
// executor posted, within a deadline).
bool linkClosable(NetLink& link);
// Shortens a sender's drain to end by `deadline` at the latest (process exit).
void hurryDrain(NetLink& link, std::chrono::steady_clock::time_point deadline);
// Adds the descriptors whose readiness is the only thing `link` waits for
// (net_wake.h). False when the link needs timed polling instead (its
// backend has no descriptors, it is being set up or drained, a kernel
// drives it).
bool linkPollFds(const NetLink& link, std::vector<pollfd>* fds);
// Registers the link's slots on link.comm (regMr, or regMrDmaBuf), once.
ncclResult_t registerLinkSlots(NetLink& link);
// Closes the backend connections (proxy thread).
void closeLink(NetLink& link);
// Whether the executor's thread may step `link` itself (the backend may be
// called from any thread, one call per connection at a time, and
// CHORUS_NET_INLINE is on); sets up link.mover when it may.
bool enableInlineMoves(NetLink& link);

}  // namespace chorus
