// One NCCL net plugin table (ncclNet_v6 ... v11, nccl_net_abi.h) behind a
// version-independent interface shaped like chorusNet_v1_t. The driver reads
// every function pointer through the exported symbol at call time, so a
// plugin that rewrites its table inside init() is followed; v11's context
// from init() is passed back to listen/connect/finalize. Chorus always posts
// one receive per irecv (n = 1, within every plugin's maxRecvs).
#pragma once

#include <cstdarg>
#include <memory>
#include <string>

#include "chorus/net_plugin.h"
#include "transports/net/nccl_net_abi.h"

namespace chorus {

class NcclNetDriver {
 public:
  virtual ~NcclNetDriver() = default;
  virtual int version() const = 0;
  // The table's name, read through the symbol (it may change in init).
  virtual const char* name() const = 0;
  virtual ncclResult_t init(ncclDebugLogger_t logger) = 0;
  // After init: the first entry Chorus needs that is NULL, or nullptr.
  virtual const char* missingEntry() const = 0;
  virtual bool hasInit() const = 0;
  virtual bool hasRegMrDmaBuf() const = 0;
  virtual bool hasFinalize() const = 0;

  virtual ncclResult_t devices(int* ndev) = 0;
  // props->name / pciPath point into the plugin. maxRecvs: the plugin's limit.
  virtual ncclResult_t getProperties(int dev, chorusNetProperties_v1_t* props, int* maxRecvs) = 0;
  virtual ncclResult_t listen(int dev, void* handle, void** listenComm) = 0;
  virtual ncclResult_t connect(int dev, const void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                                   void** mhandle) = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  virtual ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual ncclResult_t irecv(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual ncclResult_t iflush(void* comm, void* data, size_t size, void* mhandle, void** request) = 0;
  virtual ncclResult_t test(void* request, int* done, size_t* size) = 0;
  virtual ncclResult_t closeSend(void* comm) = 0;
  virtual ncclResult_t closeRecv(void* comm) = 0;
  virtual ncclResult_t closeListen(void* comm) = 0;
  virtual ncclResult_t finalize() = 0;
};

// The newest NCCL table `lib` exports (ncclNetPlugin_v11 down to _v6), or
// nullptr with the reason in *why (none found; only a newer version; a NULL
// name or init). *symbol: the symbol used.
std::unique_ptr<NcclNetDriver> ncclNetDriverFromLibrary(void* lib, std::string* symbol, std::string* why);

// What the logger handed to an NCCL plugin does: the line goes to Chorus's
// logger, prefixed with `who`, with the plugin's level and subsystem bits
// mapped to Chorus's (so NCCL_DEBUG / NCCL_DEBUG_SUBSYS filter it).
void ncclNetPluginVlog(const char* who, ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                       const char* fmt, va_list ap);
// NCCL subsystem bits (NCCL_INIT ... NCCL_RAS) to Chorus's kLog* bits.
uint32_t chorusSubsysFromNccl(unsigned long flags);

}  // namespace chorus
