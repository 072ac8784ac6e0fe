// Where a step's pieces leave from and land: step rules next to
// step_rules.h's. Only the host executor asks today: the connector ends that
// can send from and receive into user memory are host-mode network links
// (FifoEnd::sendsUserMemory and FifoEnd::landings in src/transport/fifo.h),
// never the kernel-driven ones of GPU mode.
#pragma once

#include <cstdint>

#include "kernels/common/reduce_kind.h"
#include "kernels/common/step_rules.h"

namespace chorus::step {

// When the send end can send straight from this rank's memory (a network
// link that gathers its header and the payload into one message), no slot
// copy is made: the step computes into its output and the output is sent, or
// a step that only copies its input sends the input. Not for two sends (the
// second would need a copy anyway) nor for ReduceThree, which reuses its
// target as scratch and must not do so in an output that may alias `in`.
enum class SendFrom : uint8_t { Slot, Output, Input };

// Whether the step's pre- or post-operation changes the bytes under
// reduction `kind` (the flags are set for every reducing step; only
// PreMulSum scales the input and only SumPostDiv divides the result).
CHORUS_HD CHORUS_INLINE bool scalesInput(const StepDesc& s, ReduceKind kind) {
  return s.preSrc != 0 && kind == ReduceKind::PreMulSum;
}
CHORUS_HD CHORUS_INLINE bool dividesResult(const StepDesc& s, ReduceKind kind) {
  return s.post != 0 && kind == ReduceKind::SumPostDiv;
}

CHORUS_HD CHORUS_INLINE SendFrom sendSource(const StepDesc& s, ReduceKind kind, bool endSendsUserMemory) {
  if (!endSendsUserMemory || s.nSend != 1) return SendFrom::Slot;
  if (combineCase(s) == Combine::ReduceThree) return SendFrom::Slot;
  if (hasOutput(s)) return SendFrom::Output;
  if (combineCase(s) == Combine::Transform && hasInput(s) && !scalesInput(s, kind) && !dividesResult(s, kind))
    return SendFrom::Input;
  return SendFrom::Slot;
}

// Whether a step's received pieces can land in its output straight from the
// wire, where the receive end offers it: a plain receive (the piece is the
// output), also when it is sent on from the output.
CHORUS_HD CHORUS_INLINE bool landsInOutput(const StepDesc& s, ReduceKind kind, SendFrom from) {
  return combineCase(s) == Combine::Forward && hasOutput(s) && !dividesResult(s, kind) &&
         (s.nSend == 0 || from == SendFrom::Output);
}

}  // namespace chorus::step
