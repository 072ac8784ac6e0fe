/*
 * Chorus extensions to the NCCL API. Everything here is optional: programs
 * written for NCCL never need it. Declared with C linkage.
 */
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a communicator executes collectives.
 *  - chorusModeAuto: GPU mode when a usable CUDA device and the GPU executor
 *    are present, host mode otherwise.
 *  - chorusModeHost: buffers are host pointers, the stream argument is ignored
 *    and every call (or ncclGroupEnd) returns once the operation is complete.
 *  - chorusModeGpu: buffers are device pointers; init fails with
 *    ncclInvalidUsage when no GPU executor or device is available. */
typedef enum { chorusModeAuto = 0, chorusModeHost = 1, chorusModeGpu = 2 } chorusMode_t;

/* Sets the mode used by communicators created afterwards by this process.
 * Takes precedence over the CHORUS_MODE environment variable. */
ncclResult_t chorusSetDefaultMode(chorusMode_t mode);

/* Reports the mode a communicator runs in (never chorusModeAuto). */
ncclResult_t chorusCommGetMode(ncclComm_t comm, chorusMode_t* mode);

/* ---- Reductions with a chosen wire format (docs/wire.md) ----
 * chorusWireNative keeps today's behaviour. The other formats compress what
 * travels between ranks: each rank's contribution is quantized once, the
 * owner of each shard accumulates in fp32 and quantizes the result once for
 * the gather phase, so the error does not grow with the hop count. They take
 * float, half and bfloat16 with ncclSum or ncclAvg. */
typedef enum {
  chorusWireNative = 0,     /* the datatype itself */
  chorusWireBfloat16 = 1,   /* float inputs travel as bf16 */
  chorusWireFloat8e4m3 = 2, /* blocks scaled to fp8 e4m3, one fp32 scale per block */
  chorusWireInt8 = 3        /* blocks scaled to int8 (absmax), one fp32 scale per block */
} chorusWire_t;

typedef struct {
  chorusWire_t wire;
  /* Error feedback: `count` floats owned by the caller (for
   * chorusReduceScatterEx: recvcount * nranks), or NULL. In GPU mode, memory
   * the GPU can access (device memory or mapped host memory). */
  float* residual;
  /* 1: the sum in rank order 0..n-1, accumulated in fp32 (fp64 for double,
   * exact for integers), rounded once: bit-identical for every algorithm,
   * protocol, channel count, message size and mode. */
  int deterministic;
} chorusReduceConfig_t;
#define CHORUS_REDUCE_CONFIG_INIT {chorusWireNative, NULL, 0}

/* As ncclAllReduce / ncclReduceScatter, with a configuration (NULL means
 * CHORUS_REDUCE_CONFIG_INIT). */
ncclResult_t chorusAllReduceEx(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, const chorusReduceConfig_t* config, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t chorusReduceScatterEx(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   ncclDataType_t datatype, ncclRedOp_t op, const chorusReduceConfig_t* config,
                                   ncclComm_t comm, cudaStream_t stream);

/* ---- Traffic counters ----
 * Cumulative per communicator, for this rank, counted where bytes enter (or
 * leave) a connector, by the kind of link the connector runs over. */
typedef enum {
  chorusLinkInproc = 0,
  chorusLinkShm = 1,
  chorusLinkP2p = 2,
  chorusLinkNet = 3,
  chorusLinkCount = 4
} chorusLink_t;

typedef struct {
  size_t size; /* the caller sets sizeof(chorusCommStats_t) */
  uint64_t ops; /* completed collective and point-to-point calls */
  uint64_t bytesSent[chorusLinkCount];
  uint64_t bytesRecv[chorusLinkCount];
} chorusCommStats_t;

ncclResult_t chorusCommGetStats(ncclComm_t comm, chorusCommStats_t* stats);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_CHORUS_H_ */
