// Elementwise reduction kernels for the host executor.
//
// These are the CPU side of the reduce functors in kernels/common/reduce_ops.h:
// the same per-element semantics, run over whole buffers. They sit on the hot
// path of a CPU all-reduce, so the (type x kind x flags) dispatch happens once
// per call and the inner loops are AVX2 where the CPU has it (chosen at run
// time; other CPUs get portable C++). They never spawn threads: several ranks
// may share one core.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/coll_types.h"  // ReduceSpec, typeSize

namespace chorus {
namespace host {

// dst[i] = post?( pre_a?(a[i]) (+) pre_b?(b[i]) ) where (+) is the spec's
// combine operator, pre_x applies the PreMulSum scalar when preX is true
// (identity for other kinds) and post applies SumPostDiv's division when
// applyPost is true (identity for other kinds). dst may equal a or b; no other
// overlap. Pointers need no particular alignment.
void reduce(const ReduceSpec& spec, void* dst, const void* a, bool preA, const void* b, bool preB, size_t n,
            bool applyPost);

// dst[i] = post?(pre?(src[i])). Without pre and post this is a copy; dst may
// equal src.
void transform(const ReduceSpec& spec, void* dst, const void* src, bool pre, size_t n, bool applyPost);

// Which inner loops reduce()/transform() use. Detected once from the CPU;
// tests force Portable to cover the fallback on AVX2 machines.
enum class SimdLevel : uint8_t { Portable, Avx2 };
SimdLevel detectedSimdLevel();
SimdLevel activeSimdLevel();
// Selects the level for later calls (capped at the detected one); returns the
// previous active level. Not meant to be changed while reductions run.
SimdLevel setSimdLevel(SimdLevel level);

}  // namespace host
}  // namespace chorus
