#include "api/wire_args.h"

#include "api/arg_checks.h"
#include "core/comm.h"
#include "core/result.h"
#include "core/wire_residuals.h"
#include "core/wire_support.h"
#include "gpu/gpu_runtime.h"
#include "kernels/common/wire_codec.h"

namespace chorus {
namespace {

const char* wireName(int w) {
  switch (w) {
    case 0:
      return "native";
    case 1:
      return "bf16";
    case 2:
      return "fp8";
    case 3:
      return "int8";
    default:
      return "?";
  }
}

ncclResult_t checkConfig(const Task& t, const chorusReduceConfig_t& c, const char* fn) {
  const int w = enumValue(c.wire);
  if (w < 0 || w >= wire::kNumFormats)
    return fail(ncclInvalidArgument,
                "%s: invalid wire %d (chorusWireNative, chorusWireBfloat16, chorusWireFloat8e4m3 or chorusWireInt8)",
                fn, w);
  if (w != 0 && !wireCompresses(t.dtype, t.spec.kind))
    return fail(ncclInvalidArgument,
                "%s: the %s wire compresses ncclFloat32, ncclFloat16 or ncclBfloat16 with ncclSum or ncclAvg only "
                "(got datatype %d, op %d); use chorusWireNative for other types and operators",
                fn, wireName(w), static_cast<int>(t.dtype), static_cast<int>(t.spec.kind));
  if (w == 0 && c.residual != nullptr)
    return fail(ncclInvalidArgument, "%s: residual (error feedback) needs a compressed wire, not chorusWireNative", fn);
  return ncclSuccess;
}

// The knobs of the plain calls: CHORUS_DETERMINISTIC for every reduction,
// CHORUS_WIRE for large enough float sums and averages (AllReduce and
// ReduceScatter), with library-managed residuals under CHORUS_WIRE_FEEDBACK.
ncclResult_t fromEnvironment(Task* t) {
  const CommConfig& cfg = t->comm->config;
  t->wire.deterministic = cfg.deterministic;
  if (cfg.wire == 0) return ncclSuccess;  // the common case: no compression asked for
  const bool kind = t->type == CollType::AllReduce || t->type == CollType::ReduceScatter;
  if (!kind || !wireCompresses(t->dtype, t->spec.kind) || t->count == 0 ||
      taskBytes(*t, t->comm->id.nranks) < cfg.wireMinBytes)
    return ncclSuccess;
  t->wire.format = cfg.wire;
  if (cfg.wireFeedback) {
    const size_t n = t->type == CollType::ReduceScatter ? t->count * static_cast<size_t>(t->comm->id.nranks) : t->count;
    CHORUS_CHECK(t->comm->wireResiduals->residualFor(
        t->sendbuff, n, t->comm->id.hostMode ? nullptr : &gpu::mapHostMemory, t->comm->id.cudaDev, &t->wire.residual));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t configureWire(Task* t, bool explicitConfig, const chorusReduceConfig_t* config, const char* fn) {
  if (!explicitConfig) return fromEnvironment(t);
  const chorusReduceConfig_t c = config ? *config : chorusReduceConfig_t CHORUS_REDUCE_CONFIG_INIT;
  CHORUS_CHECK(checkConfig(*t, c, fn));
  t->wire.format = static_cast<uint8_t>(enumValue(c.wire));
  t->wire.residual = c.residual;
  t->wire.deterministic = c.deterministic != 0 || t->comm->config.deterministic;
  return ncclSuccess;  // in GPU mode the residual is checked with the buffers, once per plan (gpu_submit.cc)
}

}  // namespace chorus
