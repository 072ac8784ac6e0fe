// The step rules shared by the host executor and the lane kernel
// (kernels/common/step_rules.h), and describeLaneFailure
// (src/plan/lane_failure.h), which turns a failure record of either
// executor into the error code and message.
#include "kernels/common/step_rules.h"
#include "kernels/common/user_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/result.h"
#include "plan/lane_failure.h"

namespace chorus::step {
namespace {

using sched::kNoConn;

StepDesc makeStep(int nRecv, int nSend, StepInput input, bool output, uint64_t count) {
  StepDesc d;
  for (int i = 0; i < nRecv; ++i) d.recv[d.nRecv++] = static_cast<int16_t>(i);
  for (int i = 0; i < nSend; ++i) d.send[d.nSend++] = static_cast<int16_t>(2 + i);
  d.input = input;
  if (input != StepInput::None) d.srcOff = 0;
  if (output) d.dstOff = 0;
  d.count = count;
  return d;
}

StepDesc plainRecv(uint64_t count) { return makeStep(1, 0, StepInput::None, true, count); }

TEST(StepRules, InputBufferIsTheSegmentsSrcOrDst) {
  const int src = 0, dst = 0;
  EXPECT_EQ(inputBuffer(makeStep(0, 1, StepInput::Src, false, 1), &src, &dst), &src);
  EXPECT_EQ(inputBuffer(makeStep(1, 1, StepInput::Dst, true, 1), &src, &dst), &dst);  // in place, after an earlier step
  EXPECT_EQ(inputBuffer(makeStep(1, 0, StepInput::None, true, 1), &src, &dst), nullptr);
}

// --- piece sizing -------------------------------------------------------------------

TEST(StepRules, LocalStepIsOnePiece) {
  const StepDesc local = makeStep(0, 0, StepInput::Src, true, 1234567);
  EXPECT_EQ(pieceElems(local, 4096, 4), 1234567u);
  EXPECT_EQ(nextPiece(local, 4096, 4, 0), 1234567u);
  EXPECT_EQ(nextPiece(local, 4096, 4, 1234560), 7u);
}

TEST(StepRules, MovingStepPieceIsOneSlot) {
  EXPECT_EQ(pieceElems(makeStep(1, 0, StepInput::None, true, 100000), 4096, 4), 1024u);
  EXPECT_EQ(pieceElems(makeStep(0, 1, StepInput::Src, false, 100000), 4096, 4), 1024u);
  EXPECT_EQ(pieceElems(makeStep(1, 1, StepInput::Src, false, 100000), 4097, 4), 1024u);  // whole elements
  EXPECT_EQ(pieceElems(makeStep(1, 1, StepInput::Src, false, 100000), 4096, 8), 512u);
}

TEST(StepRules, SlotSmallerThanAnElementStillMovesOne) {
  EXPECT_EQ(pieceElems(makeStep(1, 0, StepInput::None, true, 10), 2, 8), 1u);
  EXPECT_EQ(pieceElems(makeStep(0, 1, StepInput::Src, false, 10), 0, 4), 1u);
}

TEST(StepRules, NextPieceCutsTheTail) {
  const StepDesc d = makeStep(1, 1, StepInput::Src, true, 2500);
  EXPECT_EQ(nextPiece(d, 4096, 4, 0), 1024u);
  EXPECT_EQ(nextPiece(d, 4096, 4, 1024), 1024u);
  EXPECT_EQ(nextPiece(d, 4096, 4, 2048), 452u);
  EXPECT_EQ(nextPiece(d, 4096, 4, 2499), 1u);
}

TEST(StepRules, PiecesTileTheStep) {
  for (const uint64_t count : {uint64_t(1), uint64_t(1023), uint64_t(1024), uint64_t(1025), uint64_t(3) << 32}) {
    const StepDesc d = makeStep(0, 1, StepInput::Src, false, count);
    const uint32_t pieceBytes = count > (uint64_t(1) << 32) ? (64u << 20) : 4096u;
    uint64_t done = 0, pieces = 0;
    while (done < count) {
      const uint64_t n = nextPiece(d, pieceBytes, 4, done);
      ASSERT_GT(n, 0u);
      ASSERT_LE(n, pieceBytes / 4);
      done += n;
      ++pieces;
    }
    EXPECT_EQ(done, count);
    EXPECT_EQ(pieces, sched::pieceCount(count, pieceBytes / 4)) << count;
  }
}

// --- combination -----------------------------------------------------------------------

TEST(StepRules, CombineCases) {
  EXPECT_EQ(combineCase(makeStep(0, 1, StepInput::Src, false, 1)), Combine::Transform);
  EXPECT_EQ(combineCase(makeStep(0, 0, StepInput::Dst, true, 1)), Combine::Transform);
  EXPECT_EQ(combineCase(makeStep(1, 1, StepInput::None, true, 1)), Combine::Forward);
  EXPECT_EQ(combineCase(makeStep(1, 0, StepInput::Src, true, 1)), Combine::ReduceInput);
  EXPECT_EQ(combineCase(makeStep(1, 1, StepInput::Dst, false, 1)), Combine::ReduceInput);
  EXPECT_EQ(combineCase(makeStep(2, 1, StepInput::None, false, 1)), Combine::ReduceTwo);
  EXPECT_EQ(combineCase(makeStep(2, 0, StepInput::Src, true, 1)), Combine::ReduceThree);
}

// Runs a combine plan on numbers: sum, PreMulSum's scalar 3, the average's
// division by 2. The partial is kept apart from the target, as the GPU does.
double evalPlan(const CombinePlan& plan, double r0, double r1, double in) {
  double partial = 0, target = 0;
  const auto at = [&](Operand o, bool pre) {
    const double v = o == Operand::Input ? in : o == Operand::Recv0 ? r0 : o == Operand::Recv1 ? r1 : partial;
    return pre ? 3 * v : v;
  };
  for (int i = 0; i < plan.stages; ++i) {
    const CombineStage& st = plan.stage[i];
    double v = at(st.a, st.preA) + (st.b == Operand::None ? 0 : at(st.b, st.preB));
    if (st.post) v /= 2;
    (st.intoPartial ? partial : target) = v;
  }
  return target;
}

TEST(StepRules, CombinePlanComputesEachCase) {
  const double r0 = 1, r1 = 10, in = 100;
  struct Case {
    int nRecv;
    StepInput input;
    double plain;   // without PreMulSum's scalar or the division
    double scaled;  // with the scalar on the input and the division on the result
  };
  const Case cases[] = {
      {0, StepInput::Src, in, 3 * in / 2},                        // Transform
      {1, StepInput::None, r0, r0 / 2},                           // Forward
      {1, StepInput::Src, r0 + in, (r0 + 3 * in) / 2},            // ReduceInput
      {2, StepInput::None, r0 + r1, (r0 + r1) / 2},               // ReduceTwo
      {2, StepInput::Src, r0 + r1 + in, (r0 + r1 + 3 * in) / 2},  // ReduceThree
  };
  for (const Case& c : cases) {
    StepDesc d = makeStep(c.nRecv, 1, c.input, true, 8);
    EXPECT_DOUBLE_EQ(evalPlan(combinePlan(d), r0, r1, in), c.plain) << "nRecv " << c.nRecv;
    d.preSrc = 1;
    d.post = 1;
    EXPECT_DOUBLE_EQ(evalPlan(combinePlan(d), r0, r1, in), c.scaled) << "nRecv " << c.nRecv;
  }
}

// The shape the GPU's instantiations rely on: the input is never the first
// of two operands, the scalar applies only to the input, the division only
// to the last stage, and only a stage before the last keeps a partial.
TEST(StepRules, CombinePlanShape) {
  for (int nRecv = 0; nRecv <= 2; ++nRecv)
    for (StepInput input : {StepInput::None, StepInput::Src, StepInput::Dst}) {
      if (nRecv == 0 && input == StepInput::None) continue;
      StepDesc d = makeStep(nRecv, 1, input, true, 8);
      d.preSrc = 1;
      d.post = 1;
      const CombinePlan plan = combinePlan(d);
      ASSERT_GE(plan.stages, 1);
      ASSERT_LE(plan.stages, 2);
      EXPECT_EQ(plan.stages, combineCase(d) == Combine::ReduceThree ? 2 : 1);
      for (int i = 0; i < plan.stages; ++i) {
        const CombineStage& st = plan.stage[i];
        const bool last = i == plan.stages - 1;
        EXPECT_NE(st.a, Operand::None);
        if (st.b != Operand::None) {
          EXPECT_NE(st.a, Operand::Input);
        }
        EXPECT_EQ(st.preA, st.a == Operand::Input);
        EXPECT_EQ(st.preB, st.b == Operand::Input);
        EXPECT_EQ(st.post, last);
        EXPECT_EQ(st.intoPartial, !last);
        if (i == 0) {
          EXPECT_NE(st.a, Operand::Partial);
        }
      }
    }
}

TEST(StepRules, PlainReceive) {
  EXPECT_TRUE(plainReceive(plainRecv(10)));
  EXPECT_FALSE(plainReceive(makeStep(1, 1, StepInput::None, true, 10)));   // also sends
  EXPECT_FALSE(plainReceive(makeStep(1, 0, StepInput::Src, true, 10)));    // reduces
  EXPECT_FALSE(plainReceive(makeStep(1, 0, StepInput::None, false, 10)));  // no output
  EXPECT_FALSE(plainReceive(makeStep(2, 0, StepInput::None, true, 10)));   // two receives
  EXPECT_FALSE(plainReceive(makeStep(0, 0, StepInput::Src, true, 10)));    // no receive
  StepDesc divided = plainRecv(10);
  divided.post = 1;
  EXPECT_FALSE(plainReceive(divided));
}

// --- received slots ----------------------------------------------------------------------

TEST(StepRules, ClassifySlot) {
  const StepDesc one = plainRecv(1024);
  EXPECT_EQ(classifySlot(one, 4096, 4096), SlotHolds::Piece);
  EXPECT_EQ(classifySlot(one, 4092, 4096), SlotHolds::Mismatch);
  EXPECT_EQ(classifySlot(one, 4100, 4096), SlotHolds::Mismatch);
  EXPECT_EQ(classifySlot(one, kDirectSlotMarker, 4096), SlotHolds::Descriptor);
  // Any single receive sees the descriptor; checkDescriptor then rejects what cannot take it.
  EXPECT_EQ(classifySlot(makeStep(1, 1, StepInput::Src, false, 1024), kDirectSlotMarker, 4096), SlotHolds::Descriptor);
  // With two receives a descriptor is never expected.
  EXPECT_EQ(classifySlot(makeStep(2, 0, StepInput::None, true, 1024), kDirectSlotMarker, 4096), SlotHolds::Mismatch);
  EXPECT_EQ(classifySlot(makeStep(2, 0, StepInput::None, true, 1024), 4096, 4096), SlotHolds::Piece);
}

// --- zero-copy ---------------------------------------------------------------------------

TEST(StepRules, SendsZeroCopy) {
  StepDesc send = makeStep(0, 1, StepInput::Src, false, 1000);
  send.direct = 1;
  EXPECT_TRUE(sendsZeroCopy(send, true));
  EXPECT_FALSE(sendsZeroCopy(send, false));  // the peer cannot read our buffers
  StepDesc notDirect = send;
  notDirect.direct = 0;
  EXPECT_FALSE(sendsZeroCopy(notDirect, true));
  StepDesc twoSends = makeStep(0, 2, StepInput::Src, false, 1000);
  twoSends.direct = 1;
  EXPECT_FALSE(sendsZeroCopy(twoSends, true));
  StepDesc alsoReceives = makeStep(1, 1, StepInput::Src, false, 1000);
  alsoReceives.direct = 1;
  EXPECT_FALSE(sendsZeroCopy(alsoReceives, true));
  StepDesc noInput = makeStep(0, 1, StepInput::None, false, 1000);
  noInput.direct = 1;
  EXPECT_FALSE(sendsZeroCopy(noInput, true));
}

TEST(StepRules, SendSourceUsesUserMemoryOnlyWhereTheSentBytesAreThere) {
  using F = SendFrom;
  constexpr ReduceKind kSum = ReduceKind::Sum;
  StepDesc copyInput = makeStep(0, 1, StepInput::Src, false, 1000);
  copyInput.preSrc = 1;  // set on every reducing step; changes nothing under Sum
  const StepDesc reduceToOutput = makeStep(1, 1, StepInput::Src, true, 1000);
  const StepDesc forwardToOutput = makeStep(1, 1, StepInput::None, true, 1000);
  const StepDesc reduceOnward = makeStep(1, 1, StepInput::Src, false, 1000);  // a partial sum: only in the slot
  EXPECT_EQ(sendSource(copyInput, kSum, true), F::Input);
  EXPECT_EQ(sendSource(reduceToOutput, kSum, true), F::Output);
  EXPECT_EQ(sendSource(forwardToOutput, kSum, true), F::Output);
  EXPECT_EQ(sendSource(reduceOnward, kSum, true), F::Slot);
  for (const StepDesc& s : {copyInput, reduceToOutput, forwardToOutput}) EXPECT_EQ(sendSource(s, kSum, false), F::Slot);
  // PreMulSum's scalar and SumPostDiv's division change the bytes...
  EXPECT_EQ(sendSource(copyInput, ReduceKind::PreMulSum, true), F::Slot);
  StepDesc divided = makeStep(0, 1, StepInput::Src, false, 1000);
  divided.post = 1;
  EXPECT_EQ(sendSource(divided, ReduceKind::SumPostDiv, true), F::Slot);
  EXPECT_EQ(sendSource(divided, kSum, true), F::Input);
  StepDesc scaledIntoOutput = copyInput;  // ...unless they are computed into the output, which is sent
  scaledIntoOutput.dstOff = 0;
  EXPECT_EQ(sendSource(scaledIntoOutput, ReduceKind::PreMulSum, true), F::Output);
  EXPECT_EQ(sendSource(makeStep(0, 2, StepInput::Src, true, 1000), kSum, true), F::Slot);  // two sends
  EXPECT_EQ(sendSource(makeStep(2, 1, StepInput::Src, true, 1000), kSum, true), F::Slot);  // ReduceThree: scratch
  EXPECT_EQ(sendSource(makeStep(2, 1, StepInput::None, true, 1000), kSum, true), F::Output);
  EXPECT_EQ(sendSource(makeStep(1, 0, StepInput::None, true, 1000), kSum, true), F::Slot);  // no send at all
}

TEST(StepRules, OnlyPlainReceivesIntoTheOutputLandThere) {
  constexpr ReduceKind kSum = ReduceKind::Sum;
  EXPECT_TRUE(landsInOutput(plainRecv(1000), kSum, SendFrom::Slot));
  const StepDesc forwardOn = makeStep(1, 1, StepInput::None, true, 1000);
  EXPECT_TRUE(landsInOutput(forwardOn, kSum, SendFrom::Output));  // then sent on from the output
  EXPECT_FALSE(landsInOutput(forwardOn, kSum, SendFrom::Slot));   // the slot copy is made from the slot
  EXPECT_FALSE(landsInOutput(makeStep(1, 0, StepInput::Src, true, 1000), kSum, SendFrom::Slot));  // reduces
  EXPECT_FALSE(landsInOutput(makeStep(2, 0, StepInput::None, true, 1000), kSum, SendFrom::Slot));
  EXPECT_FALSE(landsInOutput(makeStep(1, 1, StepInput::None, false, 1000), kSum, SendFrom::Slot));  // no output
  StepDesc divides = plainRecv(1000);
  divides.post = 1;
  EXPECT_FALSE(landsInOutput(divides, ReduceKind::SumPostDiv, SendFrom::Slot));
  EXPECT_TRUE(landsInOutput(divides, kSum, SendFrom::Slot));
}

TEST(StepRules, CheckDescriptor) {
  EXPECT_EQ(checkDescriptor(plainRecv(999), 0, 3996, 4), DescriptorCheck::Ok);
  EXPECT_EQ(checkDescriptor(plainRecv(999), 1, 3996, 4), DescriptorCheck::MidReceive);
  EXPECT_EQ(checkDescriptor(makeStep(1, 1, StepInput::None, true, 999), 0, 3996, 4), DescriptorCheck::NotPlainReceive);
  EXPECT_EQ(checkDescriptor(makeStep(1, 0, StepInput::Src, true, 999), 0, 3996, 4), DescriptorCheck::NotPlainReceive);
  EXPECT_EQ(checkDescriptor(plainRecv(999), 0, 4000, 4), DescriptorCheck::WrongSize);
  EXPECT_EQ(checkDescriptor(plainRecv(999), 0, 3992, 4), DescriptorCheck::WrongSize);
  // Mid-receive is reported first, whatever else is wrong.
  EXPECT_EQ(checkDescriptor(makeStep(1, 1, StepInput::Src, true, 999), 5, 1, 4), DescriptorCheck::MidReceive);
  // Sizes above 4 GiB compare in 64 bits.
  const uint64_t big = (uint64_t(1) << 31) + 1;
  EXPECT_EQ(checkDescriptor(plainRecv(big), 0, big * 4, 4), DescriptorCheck::Ok);
  EXPECT_EQ(checkDescriptor(plainRecv(big), 0, (big * 4) & 0xFFFFFFFFu, 4), DescriptorCheck::WrongSize);
}

TEST(StepRules, DirectChunks) {
  EXPECT_EQ(directChunk(0, 100), 100u);
  EXPECT_EQ(directChunk(0, kDirectChunkBytes), kDirectChunkBytes);
  const uint64_t total = 3 * kDirectChunkBytes + 5;
  uint64_t off = 0, chunks = 0;
  for (; off < total; ++chunks) {
    const uint64_t n = directChunk(off, total);
    ASSERT_GT(n, 0u);
    ASSERT_LE(n, kDirectChunkBytes);
    off += n;
  }
  EXPECT_EQ(off, total);
  EXPECT_EQ(chunks, 4u);
  EXPECT_EQ(directChunk(3 * kDirectChunkBytes, total), 5u);
  EXPECT_EQ(directChunk(total - 1, total), 1u);
}

// --- failure records -------------------------------------------------------------------

TEST(StepRules, FailureConstructors) {
  const LaneFailure s = sizeMismatch(2, 3, 4000, 3996);
  EXPECT_EQ(s.status, static_cast<int32_t>(LaneStatus::SizeMismatch));
  EXPECT_EQ(s.lane, 2);
  EXPECT_EQ(s.peer, 3);
  EXPECT_EQ(s.detail, 4000u);
  EXPECT_EQ(s.expected, 3996u);
  EXPECT_EQ(s.claim, 0);
  const uint64_t big = (uint64_t(5) << 32) + 1;
  const LaneFailure d = descriptorMismatch(1, 7, DescriptorCheck::WrongSize, big, big - 4);
  EXPECT_EQ(d.status, static_cast<int32_t>(LaneStatus::DescriptorMismatch));
  EXPECT_EQ(d.detail, static_cast<uint32_t>(DescriptorCheck::WrongSize));
  EXPECT_EQ(d.received, big);
  EXPECT_EQ(d.expected, big - 4);
  EXPECT_EQ(d.peer, 7);
  const LaneFailure w = waitFailure(LaneStatus::Aborted, 4, 9);
  EXPECT_EQ(w.status, static_cast<int32_t>(LaneStatus::Aborted));
  EXPECT_EQ(w.lane, 4);
  EXPECT_EQ(w.peer, 9);
}

TEST(StepRules, WaitedConnector) {
  const PeerOf r = waitedConnector(makeStep(2, 1, StepInput::None, true, 1));
  EXPECT_EQ(r.connector, 0);
  EXPECT_TRUE(r.receiving);
  const PeerOf s = waitedConnector(makeStep(0, 2, StepInput::Src, false, 1));
  EXPECT_EQ(s.connector, 2);
  EXPECT_FALSE(s.receiving);
  const PeerOf none = waitedConnector(makeStep(0, 0, StepInput::Src, true, 1));
  EXPECT_EQ(none.connector, kNoConn);
}

struct Described {
  ncclResult_t code;
  std::string msg;
};

Described describe(const LaneFailure& f, int rank = 5, int64_t timeoutMs = 1500) {
  char msg[384];
  const ncclResult_t code = describeLaneFailure(f, rank, timeoutMs, msg, sizeof(msg));
  return {code, msg};
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(StepRulesFailureMessage, Aborted) {
  const Described d = describe(waitFailure(LaneStatus::Aborted, 2, 3));
  EXPECT_EQ(d.code, ncclInvalidUsage);
  EXPECT_CONTAINS(d.msg, "rank 5:");
  EXPECT_CONTAINS(d.msg, "ncclCommAbort");
  EXPECT_CONTAINS(d.msg, "peer rank 3");
  EXPECT_CONTAINS(d.msg, "lane 2");
}

TEST(StepRulesFailureMessage, TimedOutNamesTheDirection) {
  LaneFailure f = waitFailure(LaneStatus::TimedOut, 1, 3);
  f.detail = 1;
  const Described recv = describe(f, 6, 1500);
  EXPECT_EQ(recv.code, ncclRemoteError);
  EXPECT_CONTAINS(recv.msg, "rank 6:");
  EXPECT_CONTAINS(recv.msg, "made no progress for 1500 ms");
  EXPECT_CONTAINS(recv.msg, "peer rank 3");
  EXPECT_CONTAINS(recv.msg, "receiving");
  EXPECT_CONTAINS(recv.msg, "CHORUS_TIMEOUT_MS");
  f.detail = 0;
  const Described send = describe(f, 6, 1500);
  EXPECT_EQ(send.code, ncclRemoteError);
  EXPECT_CONTAINS(send.msg, "sending");
  EXPECT_EQ(send.msg.find("receiving"), std::string::npos) << send.msg;
}

TEST(StepRulesFailureMessage, SizeMismatch) {
  const Described d = describe(sizeMismatch(2, 3, 4000, 3996));
  EXPECT_EQ(d.code, ncclInvalidUsage);
  EXPECT_CONTAINS(d.msg, "rank 5: peer rank 3 sent a piece of 4000 bytes where 3996 were expected");
  EXPECT_CONTAINS(d.msg, "lane 2");
  EXPECT_CONTAINS(d.msg, "mismatched counts");
}

TEST(StepRulesFailureMessage, SizeMismatchAgainstADescriptor) {
  const Described d = describe(sizeMismatch(0, 3, kDirectSlotMarker, 3996));
  EXPECT_EQ(d.code, ncclInvalidUsage);
  EXPECT_CONTAINS(d.msg, "peer rank 3 sent a zero-copy message where this rank expected a piece of 3996 bytes");
  EXPECT_EQ(d.msg.find("4294967295"), std::string::npos) << d.msg;
}

TEST(StepRulesFailureMessage, DescriptorMismatchEachReason) {
  const Described size = describe(descriptorMismatch(2, 3, DescriptorCheck::WrongSize, 4000, 3996));
  EXPECT_EQ(size.code, ncclInvalidUsage);
  EXPECT_CONTAINS(size.msg, "rank 5: peer rank 3 sent 4000 bytes zero-copy where 3996 were expected");
  EXPECT_CONTAINS(size.msg, "lane 2");
  const Described mid = describe(descriptorMismatch(2, 3, DescriptorCheck::MidReceive, 4000, 1000));
  EXPECT_EQ(mid.code, ncclInvalidUsage);
  EXPECT_CONTAINS(mid.msg, "peer rank 3 sent 4000 bytes zero-copy");
  EXPECT_CONTAINS(mid.msg, "middle of a receive");
  const Described plain = describe(descriptorMismatch(2, 3, DescriptorCheck::NotPlainReceive, 4000, 4000));
  EXPECT_EQ(plain.code, ncclInvalidUsage);
  EXPECT_CONTAINS(plain.msg, "also sends or reduces");
  // 64-bit sizes print in full.
  const uint64_t big = (uint64_t(5) << 32) + 1;
  const Described large = describe(descriptorMismatch(0, 1, DescriptorCheck::WrongSize, big, big - 4));
  EXPECT_CONTAINS(large.msg, "sent " + std::to_string(big) + " bytes zero-copy where " + std::to_string(big - 4));
}

TEST(StepRulesFailureMessage, UnknownStatusIsInternal) {
  LaneFailure f;
  f.status = 9;
  const Described d = describe(f);
  EXPECT_EQ(d.code, ncclInternalError);
  EXPECT_CONTAINS(d.msg, "unknown status 9");
  f.status = static_cast<int32_t>(LaneStatus::Ok);
  EXPECT_EQ(describe(f).code, ncclInternalError);
}

TEST(StepRulesFailureMessage, SmallBufferIsTruncatedNotOverrun) {
  char msg[24];
  msg[sizeof(msg) - 1] = 'x';
  const ncclResult_t code =
      describeLaneFailure(sizeMismatch(2, 3, 4000, 3996), 5, 0, msg, sizeof(msg) - 1);  // last byte: a guard
  EXPECT_EQ(code, ncclInvalidUsage);
  EXPECT_EQ(std::string(msg), std::string("rank 5: peer rank 3 sent a").substr(0, sizeof(msg) - 2));
  EXPECT_EQ(msg[sizeof(msg) - 1], 'x');
}

TEST(StepRulesFailureMessage, LaneFailureErrorRecordsTheMessage) {
  const ncclResult_t code = laneFailureError(descriptorMismatch(4, 3, DescriptorCheck::WrongSize, 4000, 3996), 1, 0);
  EXPECT_EQ(code, ncclInvalidUsage);
  EXPECT_CONTAINS(std::string(lastErrorMessage()), "rank 1: peer rank 3 sent 4000 bytes zero-copy where 3996");
}

}  // namespace
}  // namespace chorus::step
