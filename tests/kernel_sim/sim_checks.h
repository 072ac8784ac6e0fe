// Helpers the kernel_sim tests share: tasks, element conversions, and the
// check of a finished call.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/rank_runner.h"
#include "common/task_builder.h"
#include "core/coll_types.h"
#include "enqueue/task.h"
#include "kernel_sim/sim_rank.h"
#include "kernels/common/float_types.h"
#include "plan/lane_failure.h"

namespace chorus::test {

inline Task simTask(RankCtx& ctx, CollType coll, ncclDataType_t dtype, ReduceSpec spec, const void* in, void* out,
                    size_t count, int root = 0) {
  return makeTask(ctx.comm, coll, dtype, spec, in, out, count, root);
}

// Elements as the tests write and read them.
template <typename T>
T fromFloat(float f) {
  return static_cast<T>(f);
}
template <>
inline bf16_t fromFloat<bf16_t>(float f) {
  return floatToBf16(f);
}
inline float toFloat(float v) { return v; }
inline float toFloat(int32_t v) { return static_cast<float>(v); }
inline float toFloat(bf16_t v) { return bf16ToFloat(v); }

// Whether two float arrays hold the same bits (a -0 against a +0 differs).
inline bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  return true;
}

// The failure record's message, as the GPU executor reports it.
inline std::string describe(const SimOutcome& o, int rank) {
  char msg[512];
  describeLaneFailure(o.record, rank, 0, msg, sizeof msg);
  return msg;
}

// A finished call: no barrier fault, no failure record, and `got` equal to
// `want` element for element (compared as floats).
template <typename T>
void expectExact(RankCtx& ctx, const SimOutcome& o, const std::vector<T>& got, const std::vector<float>& want,
                 const char* what) {
  for (const std::string& f : o.faults) ctx.fail("rank %d, %s: %s", ctx.rank, what, f.c_str());
  if (o.record.status != 0) {
    ctx.fail("rank %d, %s: the kernel failed: %s", ctx.rank, what, describe(o, ctx.rank).c_str());
    return;
  }
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (toFloat(got[i]) != want[i] && wrong++ == 0) first = i;
  if (wrong > 0)
    ctx.fail("rank %d, %s: %zu of %zu elements wrong, first at %zu: %g, want %g", ctx.rank, what, wrong, want.size(),
             first, static_cast<double>(toFloat(got[first])), static_cast<double>(want[first]));
}

}  // namespace chorus::test
