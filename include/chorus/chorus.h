/*
 * Chorus extensions to the NCCL API. Everything here is optional: programs
 * written for NCCL never need it. Declared with C linkage.
 */
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

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

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_CHORUS_H_ */
