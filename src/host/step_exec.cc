// One piece of one step: the data path of host mode.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "core/result.h"
#include "host/executor.h"
#include "host/host_reduce.h"
#include "host/stream_copy.h"

namespace chorus {
namespace {

// False until every connector of the step is ready. A single receive whose
// slot holds a zero-copy descriptor sets *direct instead (receiveDirect).
bool connectorsReady(HostStep& s, uint32_t bytes, bool* direct, ncclResult_t* err) {
  for (int i = 0; i < s.nRecv; ++i) {
    if (!s.recv[i]->ready()) return false;
    if (s.nRecv == 1 && s.recv[i]->size() == kDirectSlotMarker) {
      *direct = true;
      return false;
    }
    if (s.recv[i]->size() != bytes) {
      *err = fail(ncclInvalidUsage,
                  "rank %d sent a piece of %u bytes where %u were expected: mismatched counts, datatypes or call "
                  "order between ranks",
                  s.recv[i]->end().peer, s.recv[i]->size(), bytes);
      return false;
    }
  }
  for (int i = 0; i < s.nSend; ++i)
    if (!s.send[i]->ready()) return false;
  return true;
}

// Computes the piece into `target`: the combination of the received pieces
// and the local input, with PreMulSum on the local input and the final
// division applied once to the result.
void combine(const HostStep& s, char* target, const char* src, size_t n) {
  const ReduceSpec& spec = *s.spec;
  if (s.nRecv == 0) {
    host::transform(spec, target, src, s.preSrc, n, s.post);
  } else if (s.nRecv == 1 && src == nullptr) {
    host::transform(spec, target, s.recv[0]->slot(), false, n, s.post);
  } else if (s.nRecv == 1) {
    host::reduce(spec, target, s.recv[0]->slot(), false, src, s.preSrc, n, s.post);
  } else if (src == nullptr) {
    host::reduce(spec, target, s.recv[0]->slot(), false, s.recv[1]->slot(), false, n, s.post);
  } else {
    host::reduce(spec, target, s.recv[0]->slot(), false, s.recv[1]->slot(), false, n, false);
    host::reduce(spec, target, target, false, src, s.preSrc, n, s.post);
  }
}

// A direct send step (kernels/common/direct_slot.h): posts the descriptor of the whole
// step once, then finishes when the receiver has freed it, i.e. has copied
// the data out of our buffer.
bool progressDirectSend(Lane& lane, HostStep& s) {
  SendConnector* out = s.send[0];
  if (!lane.awaitingReader) {
    if (!out->ready()) return false;
    const DirectDescriptor d{reinterpret_cast<uintptr_t>(s.src), s.count * typeSize(s.spec->type), 0};
    std::memcpy(out->slot(), &d, sizeof(d));
    out->post(kDirectSlotMarker);
    lane.awaitingReader = true;
    lane.readerCopied = 0;
    return true;
  }
  if (!out->drained()) {
    // The slot was posted by this lane and is not freed yet: it still holds
    // our descriptor, whose `copied` the reader advances.
    auto* posted = reinterpret_cast<DirectDescriptor*>(out->lastPostedSlot());
    const uint64_t copied = std::atomic_ref<uint64_t>(posted->copied).load(std::memory_order_relaxed);
    if (copied == lane.readerCopied) return false;
    lane.readerCopied = copied;  // the reader is moving: counts as progress
    return true;
  }
  lane.awaitingReader = false;
  lane.done = s.count;
  return true;
}

// The receiving side of a direct send: the whole step copied straight from
// the sender's buffer. Only a plain receive into an output, at the start of its
// step, can match one; anything else is a mismatch between the ranks' calls.
bool receiveDirect(Lane& lane, HostStep& s, ncclResult_t* err) {
  RecvConnector* in = s.recv[0];
  auto* d = reinterpret_cast<DirectDescriptor*>(const_cast<char*>(in->slot()));
  const size_t expected = (s.count - lane.done) * typeSize(s.spec->type);
  std::string want;
  if (lane.done != 0)
    want = "this rank was in the middle of a receive (the ranks split the data differently)";
  else if (s.nSend != 0 || s.src != nullptr || s.dst == nullptr || s.post)
    want = "this rank's step also sends or reduces";
  else if (d->bytes != expected)
    want = std::to_string(expected) + " were expected";
  if (!want.empty()) {
    *err = fail(ncclInvalidUsage,
                "rank %d sent %llu bytes zero-copy where %s: mismatched counts, datatypes or call order between ranks",
                in->end().peer, static_cast<unsigned long long>(d->bytes), want.c_str());
    return false;
  }
  // In chunks, publishing progress for the sender, which waits meanwhile.
  const char* from = reinterpret_cast<const char*>(static_cast<uintptr_t>(d->address));
  for (size_t off = 0; off < expected; off += kDirectChunkBytes) {
    const size_t n = std::min<size_t>(kDirectChunkBytes, expected - off);
    if (s.streamDst)
      host::streamCopy(s.dst + off, from + off, n);
    else
      std::memcpy(s.dst + off, from + off, n);
    std::atomic_ref<uint64_t>(d->copied).store(off + n, std::memory_order_relaxed);
  }
  in->release();
  lane.done = s.count;
  return true;
}

}  // namespace

bool progressLane(Lane& lane, ncclResult_t* err) {
  while (!lane.finished() && lane.steps[lane.cur].count == lane.done) {
    ++lane.cur;
    lane.done = 0;
  }
  if (lane.finished()) return false;
  HostStep& s = lane.steps[lane.cur];
  if (s.direct && s.send[0]->end().peerReadsOurBuffers) return progressDirectSend(lane, s);
  const size_t esz = typeSize(s.spec->type);
  const size_t pieceElems = (s.nRecv + s.nSend) ? std::max<size_t>(1, lane.pieceBytes / esz) : s.count;
  const size_t n = std::min(pieceElems, s.count - lane.done);
  const uint32_t bytes = static_cast<uint32_t>(n * esz);
  bool direct = false;
  if (!connectorsReady(s, bytes, &direct, err)) return direct && receiveDirect(lane, s, err);

  const size_t off = lane.done * esz;
  const char* src = s.src ? s.src + off : nullptr;
  char* dst = s.dst ? s.dst + off : nullptr;
  // Compute into the first send slot when there is one (it stays in cache for
  // the peer), else straight into the output.
  char* target = s.nSend ? s.send[0]->slot() : dst;
  if (s.streamDst && target == dst && s.nRecv == 1 && src == nullptr && !s.post) {
    host::streamCopy(dst, s.recv[0]->slot(), bytes);  // a pure receive into a large output
  } else {
    combine(s, target, src, n);
    if (dst != nullptr && dst != target) {
      if (s.streamDst)
        host::streamCopy(dst, target, bytes);
      else
        std::memcpy(dst, target, bytes);
    }
  }
  for (int i = 1; i < s.nSend; ++i) std::memcpy(s.send[i]->slot(), target, bytes);
  for (int i = 0; i < s.nSend; ++i) s.send[i]->post(bytes);
  for (int i = 0; i < s.nRecv; ++i) s.recv[i]->release();
  lane.done += n;
  return true;
}

}  // namespace chorus
