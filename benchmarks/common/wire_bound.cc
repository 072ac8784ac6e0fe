#include "common/wire_bound.h"

#include <cmath>

#include "common/datatypes.h"

namespace chorus_bench {

// docs/wire.md, "Formats and error bounds", for inputs |x| <= K on n ranks:
// every sum of magnitudes s, |sum| and block maximum is at most n*K.
double wireErrorBound(chorusWire_t wire, ncclDataType_t type, int nranks, double maxAbsInput, bool average) {
  if (wire == chorusWireNative) return 0.0;
  const double n = nranks;
  const double sumMax = n * maxAbsInput;
  double bound = 0;
  switch (wire) {
    case chorusWireBfloat16:  // 2^-8 (s + |sum|)
      bound = std::ldexp(1.0, -8) * 2 * sumMax;
      break;
    case chorusWireFloat8e4m3:  // 2^-4 (s + |sum|) + 2^-10 * 2 A_s / 448
      bound = std::ldexp(1.0, -4) * 2 * sumMax + std::ldexp(1.0, -10) * 2 * sumMax / 448.0;
      break;
    default:  // int8: (A_s + A_sum) / 254
      bound = 2 * sumMax / 254.0;
      break;
  }
  bound += n * std::ldexp(1.0, -23) * sumMax;  // fp32 accumulation
  if (average) bound /= n;
  // The output type's final rounding: half an ulp of the largest result.
  return bound + std::ldexp(1.0, -(typeInfo(type).mantissaBits + 1)) * (average ? maxAbsInput : sumMax) * 2;
}

}  // namespace chorus_bench
