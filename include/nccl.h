/*
 * Chorus — public C API.
 *
 * This header declares the NCCL 2.28 programming interface as implemented by
 * Chorus. Names, signatures, enumerator values and structure layouts match
 * NCCL 2.28.9 so that programs built against NVIDIA's header link against and
 * run with libchorus.so (or its libnccl.so.2 alias) unchanged. The text below
 * is Chorus's own; see docs/api.md for behaviour in host mode.
 *
 * The header does not require the CUDA toolkit: when <cuda_runtime.h> is not
 * available (or CHORUS_NO_CUDA_HEADERS is defined) the stream type is declared
 * as the same opaque pointer CUDA uses, which keeps the ABI identical.
 */
#ifndef NCCL_H_
#define NCCL_H_

#if !defined(CHORUS_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define CHORUS_HAVE_CUDA_HEADERS 1
#endif
#endif

#ifdef CHORUS_HAVE_CUDA_HEADERS
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if defined(__cplusplus)
#include <cuda_fp8.h>
#endif
#else
/* Same representation as the CUDA runtime's stream handle. */
typedef struct CUstream_st* cudaStream_t;
#endif

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

#include <limits.h>
#include <stddef.h>

/* Opaque handles. */
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* Status codes returned by every call. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* Flags for ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Values for ncclConfig_t::CTAPolicy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* Flags for ncclCommShrink. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* Flags for ncclCommRevoke (only the default is defined). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Per-communicator options. Start from NCCL_CONFIG_INITIALIZER and change the
 * fields you care about; fields left at NCCL_CONFIG_UNDEF_* take defaults. */
typedef struct ncclConfig_v22800 {
  size_t size;          /* set by the initializer */
  unsigned int magic;   /* set by the initializer */
  unsigned int version; /* set by the initializer */
  int blocking;         /* 0: init/collectives may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs; /* lower bound on channels */
  int maxCTAs; /* upper bound on channels */
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                   \
  {                                                                                               \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                                              \
  }

/* Output of ncclGroupSimulateEnd. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* Reduction operators. Values >= ncclNumOps are created at run time. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of a PreMulSum operator lives. */
typedef enum {
  ncclScalarDevice = 0,       /* read while the collective runs */
  ncclScalarHostImmediate = 1 /* read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* Every entry point is declared twice: ncclX and the profiling alias pncclX. */
#define CHORUS_DECLARE_API(ret, name, args) \
  ret name args;                            \
  ret p##name args;

/* Memory */
CHORUS_DECLARE_API(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
CHORUS_DECLARE_API(ncclResult_t, ncclMemFree, (void* ptr))

/* Library information and errors */
CHORUS_DECLARE_API(ncclResult_t, ncclGetVersion, (int* version))
CHORUS_DECLARE_API(const char*, ncclGetErrorString, (ncclResult_t result))
CHORUS_DECLARE_API(const char*, ncclGetLastError, (ncclComm_t comm))

/* Communicator creation and teardown */
CHORUS_DECLARE_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
CHORUS_DECLARE_API(ncclResult_t, ncclCommInitRankConfig,
                   (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
CHORUS_DECLARE_API(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
CHORUS_DECLARE_API(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
CHORUS_DECLARE_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
CHORUS_DECLARE_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
CHORUS_DECLARE_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
CHORUS_DECLARE_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
CHORUS_DECLARE_API(ncclResult_t, ncclCommSplit,
                   (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
CHORUS_DECLARE_API(ncclResult_t, ncclCommShrink,
                   (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                    ncclConfig_t* config, int shrinkFlags))
CHORUS_DECLARE_API(ncclResult_t, ncclCommInitRankScalable,
                   (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                    ncclConfig_t* config))

/* Deprecated upstream: re-reads the logging environment variables. */
__attribute__((deprecated("ncclResetDebugInit is not part of the supported API"))) void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not part of the supported API"))) void pncclResetDebugInit(void);

/* Communicator queries */
CHORUS_DECLARE_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * asyncError))
CHORUS_DECLARE_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
CHORUS_DECLARE_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
CHORUS_DECLARE_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))

/* Buffer registration */
CHORUS_DECLARE_API(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle))
CHORUS_DECLARE_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
CHORUS_DECLARE_API(ncclResult_t, ncclCommWindowRegister,
                   (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
CHORUS_DECLARE_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))

/* Custom reduction operators */
CHORUS_DECLARE_API(ncclResult_t, ncclRedOpCreatePreMulSum,
                   (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                    ncclComm_t comm))
CHORUS_DECLARE_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))

/* Collectives. In GPU mode they are stream-ordered; in host mode they return
 * once the result is in recvbuff (or, inside a group, at ncclGroupEnd). */
CHORUS_DECLARE_API(ncclResult_t, ncclReduce,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    int root, ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclBcast,
                   (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                    cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclBroadcast,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclAllReduce,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclReduceScatter,
                   (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclAllGather,
                   (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                    ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclAlltoAll,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                    cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclGather,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclScatter,
                   (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclSend,
                   (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                    cudaStream_t stream))
CHORUS_DECLARE_API(ncclResult_t, ncclRecv,
                   (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                    cudaStream_t stream))

/* Groups */
CHORUS_DECLARE_API(ncclResult_t, ncclGroupStart, (void))
CHORUS_DECLARE_API(ncclResult_t, ncclGroupEnd, (void))
CHORUS_DECLARE_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))

#undef CHORUS_DECLARE_API

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
