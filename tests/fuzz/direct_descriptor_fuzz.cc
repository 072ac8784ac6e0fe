// Zero-copy descriptors (kernels/common/direct_slot.h) as a receiver meets
// them in a slot: the size the sender published with the slot and the
// descriptor's bytes, against a receive step built from the rest of the
// input. A descriptor is taken only by a plain receive at its start, for
// exactly the step's bytes (step::classifySlot, step::checkDescriptor); the
// receiver's copy chunks must then cover it exactly.
#include <cstring>

#include "fuzz_target.h"
#include "kernels/common/direct_slot.h"
#include "kernels/common/step_rules.h"

namespace chorus::fuzz {
namespace {

struct Input {
  uint32_t published;
  uint32_t expected;
  DirectDescriptor desc;
  uint64_t done;
  uint64_t count;
  uint64_t dstOff;
  uint8_t nRecv, nSend, input, post;
  uint32_t elemBytes;
};

}  // namespace

std::vector<Bytes> seeds() {
  Input in{};
  in.published = kDirectSlotMarker;
  in.expected = 4096;
  in.desc = DirectDescriptor{0x1000, 4096 * 4, 0};
  in.count = 4096;
  in.dstOff = 0;
  in.nRecv = 1;
  in.elemBytes = 4;
  Bytes b(sizeof(in));
  std::memcpy(b.data(), &in, sizeof(in));
  Input piece = in;
  piece.published = 4096;
  Bytes p(sizeof(piece));
  std::memcpy(p.data(), &piece, sizeof(piece));
  return {b, p};
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  fuzz::Input in{};
  std::memcpy(&in, data, size < sizeof(in) ? size : sizeof(in));
  sched::StepDesc s;
  s.nRecv = in.nRecv % 3;
  s.nSend = in.nSend % 3;
  s.input = static_cast<sched::StepInput>(in.input % 3);
  s.post = in.post & 1;
  s.count = in.count;
  s.dstOff = in.dstOff;
  const uint32_t elemBytes = 1u << (in.elemBytes % 4);
  const step::SlotHolds holds = step::classifySlot(s, in.published, in.expected);
  if (holds != step::SlotHolds::Descriptor) {
    fuzz::fuzzCheck(holds != step::SlotHolds::Piece || in.published == in.expected, "a piece has the expected size");
    return 0;
  }
  fuzz::fuzzCheck(in.published == kDirectSlotMarker && s.nRecv == 1, "descriptors only on single receives");
  if (step::checkDescriptor(s, in.done, in.desc.bytes, elemBytes) != step::DescriptorCheck::Ok) return 0;
  fuzz::fuzzCheck(in.done == 0 && step::plainReceive(s), "taken only by a plain receive at its start");
  fuzz::fuzzCheck(in.desc.bytes == s.count * elemBytes, "taken only for the step's bytes");
  // The copy loop's first and last chunks: never empty, never past the end.
  const uint64_t total = in.desc.bytes;
  if (total == 0) return 0;
  const uint64_t first = step::directChunk(0, total);
  fuzz::fuzzCheck(first > 0 && first <= kDirectChunkBytes && first <= total, "first chunk");
  const uint64_t lastOff = (total - 1) / kDirectChunkBytes * kDirectChunkBytes;
  fuzz::fuzzCheck(lastOff + step::directChunk(lastOff, total) == total, "chunks end at the descriptor's end");
  return 0;
}
