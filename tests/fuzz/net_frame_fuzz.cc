// The network transport's own messages (transports/net/net_wire.h) as a
// link meets them: the first input byte picks the stream (forward slot or
// verdict message, hello, ack on the reverse connection, completion mark on
// the mark connection), the next eight the sender's posted count for an ack,
// and the rest are the received bytes. Whatever a validator accepts is then
// used as the link uses it: the fingerprints and the verdict are described
// in text (they end up in error messages), and the checks hold.
#include <algorithm>
#include <cstring>

#include "core/op_fingerprint.h"
#include "fuzz_target.h"
#include "transports/net/net_wire.h"

namespace chorus::fuzz {
namespace {

enum class Stream : uint8_t { Forward, Hello, Ack, Mark, Count };

template <class T>
Bytes message(Stream stream, const T& body, size_t bytes, uint64_t posted = 0) {
  Bytes b(1 + sizeof(posted) + bytes);
  b[0] = static_cast<uint8_t>(stream);
  std::memcpy(b.data() + 1, &posted, sizeof(posted));
  std::memcpy(b.data() + 1 + sizeof(posted), &body, std::min(bytes, sizeof(T)));
  return b;
}

OpPrint somePrint() { return makeOpPrint(CollType::Scatter, 1000, ncclFloat32, ReduceKind::Sum, 0, 3); }

void describe(const OpPrint& p) {
  char text[256];
  const int n = describeOpPrint(p, text, sizeof(text));
  fuzzCheck(n >= 0 && std::strlen(text) < sizeof(text), "a fingerprint's text fits");
}

void describe(const OpMismatchRecord& r) {
  char text[512];
  const int n = describeOpMismatch(r, text, sizeof(text));
  fuzzCheck(n >= 0 && std::strlen(text) < sizeof(text), "a verdict's text fits");
}

void forward(const uint8_t* data, size_t size) {
  struct {
    netwire::SlotHeader h;
    OpMismatchRecord verdict;
  } m{};
  std::memcpy(&m, data, std::min(size, sizeof(m)));
  const char* why = nullptr;
  if (!netwire::validSlotMessage(m.h, size, &why)) {
    fuzzCheck(why != nullptr && why[0] != '\0', "a refused message says why");
    return;
  }
  fuzzCheck(m.h.kind == netwire::Kind::Slot || size == netwire::kVerdictBytes, "a verdict has its size");
  describe(m.h.print);
  if (m.h.kind == netwire::Kind::Verdict) describe(m.verdict);
}

void ack(const uint8_t* data, size_t size, uint64_t posted) {
  netwire::Ack a{};
  std::memcpy(&a, data, std::min(size, sizeof(a)));
  if (!netwire::validAck(a, size, posted)) return;
  fuzzCheck(a.head <= posted, "an ack releases no more than was sent");
  if (a.hasIntent) describe(a.intent);
  if (a.hasVerdict) describe(a.verdict);
}

}  // namespace

std::vector<Bytes> seeds() {
  netwire::SlotHeader slot{};
  slot.magic = netwire::kMagic;
  slot.kind = netwire::Kind::Slot;
  slot.print = somePrint();
  slot.flags = netwire::kSenderWaits;
  netwire::SlotHeader hello = slot;
  hello.kind = netwire::Kind::Hello;
  netwire::Ack a{};
  a.magic = netwire::kMagic;
  a.head = 3;
  a.doneSeq = 2;
  a.hasIntent = 1;
  a.intent = somePrint();
  a.hasVerdict = 1;
  a.verdict = OpMismatchRecord{somePrint(), somePrint(), 1, 2};
  const netwire::MarkMessage mark{netwire::kMagic, netwire::Kind::Mark, 7};
  return {message(Stream::Forward, slot, netwire::kSlotHeaderBytes + 100),
          message(Stream::Hello, hello, netwire::kHelloBytes), message(Stream::Ack, a, sizeof(a), 4),
          message(Stream::Mark, mark, sizeof(mark))};
}

}  // namespace chorus::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chorus;
  if (size < 1 + sizeof(uint64_t)) return 0;
  const auto stream = static_cast<fuzz::Stream>(data[0] % static_cast<uint8_t>(fuzz::Stream::Count));
  uint64_t posted = 0;
  std::memcpy(&posted, data + 1, sizeof(posted));
  const uint8_t* body = data + 1 + sizeof(posted);
  const size_t bytes = size - 1 - sizeof(posted);
  switch (stream) {
    case fuzz::Stream::Forward:
      fuzz::forward(body, bytes);
      break;
    case fuzz::Stream::Hello: {
      netwire::SlotHeader h{};
      std::memcpy(&h, body, std::min(bytes, sizeof(h)));
      if (netwire::validHello(h, bytes)) fuzz::fuzzCheck(bytes == netwire::kHelloBytes, "a hello has its size");
      break;
    }
    case fuzz::Stream::Ack:
      fuzz::ack(body, bytes, posted);
      break;
    default: {
      netwire::MarkMessage m{};
      std::memcpy(&m, body, std::min(bytes, sizeof(m)));
      if (netwire::validMark(m, bytes)) fuzz::fuzzCheck(m.kind == netwire::Kind::Mark, "a mark is a mark");
      break;
    }
  }
  return 0;
}
