/*
 * Chorus network backend table, version 1.
 *
 * Every network backend -- the built-in socket, UCX and InfiniBand verbs
 * backends, and any external plugin -- is one instance of chorusNet_v1_t.
 * The network transport (transports/net) moves connector slots through it
 * from its proxy thread; backends never see collectives, only tagged
 * point-to-point messages on one-directional connections.
 *
 * An external plugin is a shared library that exports a variable named
 * CHORUS_NET_PLUGIN_SYMBOL ("chorusNetPlugin_v1") of this type. Load it with
 * NCCL_NET_PLUGIN=<path or name>; select a backend by name with NCCL_NET.
 * docs/net.md describes every entry and its contract.
 *
 * Conventions for all entries:
 *  - Return ncclSuccess, or an error code (ncclSystemError for local
 *    failures, ncclRemoteError when the peer is gone, ncclInvalidArgument /
 *    ncclInvalidUsage for misuse). Built-in backends also record a message
 *    for ncclGetLastError; external plugins log through the logger given to
 *    init().
 *  - Nothing blocks on the peer: connect/accept/isend/irecv that cannot make
 *    progress yet return ncclSuccess with a NULL output, and the caller
 *    retries later.
 *  - All entries for one connection are called from one thread at a time.
 */
#ifndef CHORUS_NET_PLUGIN_H_
#define CHORUS_NET_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CHORUS_NET_API_VERSION 1
#define CHORUS_NET_PLUGIN_SYMBOL "chorusNetPlugin_v1"
/* Bytes of the opaque handle listen() writes and connect() reads; it travels
 * between ranks through the bootstrap. */
#define CHORUS_NET_HANDLE_BYTES 128

/* Memory a backend can send from / receive into (bit mask). */
typedef enum {
  CHORUS_NET_PTR_HOST = 1,   /* ordinary host memory */
  CHORUS_NET_PTR_CUDA = 2,   /* device memory (GPUDirect RDMA through peer memory) */
  CHORUS_NET_PTR_DMABUF = 4  /* device memory exported as a dma-buf fd */
} chorusNetPtrType_t;

typedef enum {
  CHORUS_NET_LOG_WARN = 1,
  CHORUS_NET_LOG_INFO = 2,
  CHORUS_NET_LOG_TRACE = 3
} chorusNetLogLevel_t;

/* Logger handed to init(): printf-style, honours NCCL_DEBUG / NCCL_DEBUG_SUBSYS (NET). */
typedef void (*chorusNetLogFn_t)(chorusNetLogLevel_t level, const char* file, int line, const char* fmt, ...);

typedef struct {
  const char* name;      /* device name, e.g. "eth0" or "mlx5_0:1" */
  const char* pciPath;   /* sysfs PCI path of the device, or NULL */
  uint64_t guid;         /* unique per physical device (same guid: same NIC) */
  int ptrSupport;        /* chorusNetPtrType_t bits */
  int speedMbps;         /* link speed, 0 if unknown */
  int port;              /* port number on the device */
  float latencyUs;       /* one-way latency estimate, 0 if unknown */
  int maxComms;          /* connections the device supports */
  size_t maxMessageBytes; /* largest single isend/irecv */
} chorusNetProperties_v1_t;

typedef struct {
  /* Backend name, matched case-insensitively against NCCL_NET. */
  const char* name;
  /* CHORUS_NET_API_VERSION the backend was built for. */
  int version;

  /* Called once per process before anything else. An error (or 0 devices)
   * makes the transport skip this backend. */
  ncclResult_t (*init)(chorusNetLogFn_t logFn);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, chorusNetProperties_v1_t* props);

  /* Receiver side: listen on `dev`, write CHORUS_NET_HANDLE_BYTES of handle. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Sender side: connect to a handle. *sendComm stays NULL until connected. */
  ncclResult_t (*connect)(int dev, const void* handle, void** sendComm);
  /* Receiver side: *recvComm stays NULL until a sender has connected. */
  ncclResult_t (*accept)(void* listenComm, void** recvComm);

  /* Memory registration on a send or receive connection; type is one
   * chorusNetPtrType_t value. Backends without registration return a dummy
   * non-NULL handle. regMrDmaBuf may be NULL when unsupported. */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);

  /* Post one message. Messages on a connection complete in order, and a
   * send matches the receive posted with the same tag; a receive of `size`
   * bytes accepts any message up to that size. *request stays NULL when the
   * backend cannot take the operation yet. */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request);
  /* After a receive into device memory completed: make the data visible to
   * the GPU (GPUDirect read flush). *request NULL: nothing to wait for. */
  ncclResult_t (*iflush)(void* recvComm, void* data, size_t size, void* mhandle, void** request);
  /* *done = 1 once the request finished; *size = bytes transferred. A done
   * request is freed by the backend. */
  ncclResult_t (*test)(void* request, int* done, size_t* size);

  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} chorusNet_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_NET_PLUGIN_H_ */
