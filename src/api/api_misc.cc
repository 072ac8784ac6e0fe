// Library-level entry points: version, errors, logging, groups, memory,
// buffer registration and custom reduction operators.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "api/arg_checks.h"
#include "api/export.h"
#include "core/comm.h"
#include "core/comm_query.h"
#include "core/log.h"
#include "core/mode.h"
#include "core/result.h"
#include "enqueue/group.h"
#include "gpu/gpu_runtime.h"

using namespace chorus;

namespace {

// Allocations made by ncclMemAlloc and where they live, so ncclMemFree can
// reject foreign pointers and free each kind the right way.
class AllocationRegistry {
 public:
  enum class Kind { Host, Device };
  static AllocationRegistry& instance() {
    static AllocationRegistry r;
    return r;
  }
  void add(void* p, Kind kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_[p] = kind;
  }
  // False if `p` is not a live allocation; else removes it and says its kind.
  bool remove(void* p, Kind* kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) return false;
    *kind = it->second;
    live_.erase(it);
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, Kind> live_;
};

}  // namespace

CHORUS_EXPORT ncclResult_t ncclGetVersion(int* version) try {
  CHORUS_CHECK(checkPtr(version, "ncclGetVersion", "version"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGetVersion)

CHORUS_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the Chorus developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}
CHORUS_EXPORT_ALIAS(ncclGetErrorString)

CHORUS_EXPORT const char* ncclGetLastError(ncclComm_t comm) try {
  const char* msg = lastErrorMessage();
  if (msg[0] == '\0' && comm != nullptr && CommRegistry::instance().contains(comm)) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    thread_local std::string copy;
    copy = comm->errorMessage;
    return copy.c_str();
  }
  return msg;
} catch (...) {
  (void)chorus::apiExceptionResult(__func__);
  return "an exception escaped ncclGetLastError";
}
CHORUS_EXPORT_ALIAS(ncclGetLastError)

CHORUS_EXPORT void ncclResetDebugInit() { logReset(); }
CHORUS_EXPORT void pncclResetDebugInit() { logReset(); }

CHORUS_EXPORT ncclResult_t ncclGroupStart() try { return groupStart(); }
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGroupStart)

CHORUS_EXPORT ncclResult_t ncclGroupEnd() try { return groupEnd(); }
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGroupEnd)

CHORUS_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) try {
  CHORUS_CHECK(checkPtr(simInfo, "ncclGroupSimulateEnd", "simInfo"));
  if (simInfo->magic != 0x74685283u)
    return fail(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo not initialized with NCCL_SIM_INFO_INITIALIZER");
  float us = 0;
  CHORUS_CHECK(groupSimulateEnd(&us));
  simInfo->estimatedTime = us;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclGroupSimulateEnd)

CHORUS_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) try {
  CHORUS_CHECK(checkPtr(ptr, "ncclMemAlloc", "ptr"));
  if (size == 0) return fail(ncclInvalidArgument, "ncclMemAlloc: size is 0");
  // Memory for the mode new communicators get: device memory on the current
  // device when that is GPU mode, page-aligned host memory otherwise.
  ModeChoice mode;
  CHORUS_CHECK(chooseMode(nullptr, &mode));
  if (!mode.hostMode) {
    void* d = nullptr;
    CHORUS_CHECK(gpu::memAlloc(&d, size));
    AllocationRegistry::instance().add(d, AllocationRegistry::Kind::Device);
    *ptr = d;
    return ncclSuccess;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = nullptr;
  // Rounded up to whole pages; a size within a page of SIZE_MAX would wrap to 0.
  if (size > SIZE_MAX - (page - 1) || posix_memalign(&p, page, (size + page - 1) / page * page) != 0)
    return fail(ncclSystemError, "ncclMemAlloc: cannot allocate %zu bytes", size);
  AllocationRegistry::instance().add(p, AllocationRegistry::Kind::Host);
  *ptr = p;
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclMemAlloc)

CHORUS_EXPORT ncclResult_t ncclMemFree(void* ptr) try {
  if (ptr == nullptr) return ncclSuccess;
  AllocationRegistry::Kind kind = AllocationRegistry::Kind::Host;
  if (!AllocationRegistry::instance().remove(ptr, &kind))
    return fail(ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
  if (kind == AllocationRegistry::Kind::Device) return gpu::memFree(ptr);
  std::free(ptr);
  return ncclSuccess;
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclMemFree)

// GPU-mode communicators register device memory only (what their kernels read).
static ncclResult_t checkRegistrable(const ncclComm* comm, const void* buff, const char* fn) {
  if (comm->id.hostMode) return ncclSuccess;
  const std::string why = gpu::whyUnreachable(buff, comm->id.cudaDev);
  if (!why.empty())
    return fail(ncclInvalidArgument, "%s: %p %s; a GPU-mode communicator registers device buffers of its own GPU", fn,
                buff, why.c_str());
  return ncclSuccess;
}

CHORUS_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) try {
  CHORUS_CHECK(checkComm(comm, "ncclCommRegister"));
  CHORUS_CHECK(checkPtr(handle, "ncclCommRegister", "handle"));
  CHORUS_CHECK(checkBuffer(buff, size, "ncclCommRegister", "buff"));
  CHORUS_CHECK(checkRegistrable(comm, buff, "ncclCommRegister"));
  return comm->registrations.add(buff, size, handle);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommRegister)

CHORUS_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) try {
  CHORUS_CHECK(checkComm(comm, "ncclCommDeregister"));
  return comm->registrations.remove(handle);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommDeregister)

CHORUS_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                  int winFlags) try {
  CHORUS_CHECK(checkComm(comm, "ncclCommWindowRegister"));
  CHORUS_CHECK(checkPtr(win, "ncclCommWindowRegister", "win"));
  CHORUS_CHECK(checkBuffer(buff, size, "ncclCommWindowRegister", "buff"));
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: unknown winFlags 0x%x", winFlags);
  if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) && reinterpret_cast<uintptr_t>(buff) % NCCL_WIN_REQUIRED_ALIGNMENT != 0)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: symmetric windows must be %d-byte aligned",
                NCCL_WIN_REQUIRED_ALIGNMENT);
  CHORUS_CHECK(checkRegistrable(comm, buff, "ncclCommWindowRegister"));
  return comm->registrations.addWindow(comm, buff, size, winFlags, win);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommWindowRegister)

CHORUS_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) try {
  CHORUS_CHECK(checkComm(comm, "ncclCommWindowDeregister"));
  return comm->registrations.removeWindow(win);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclCommWindowDeregister)

CHORUS_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                    ncclScalarResidence_t residence, ncclComm_t comm) try {
  CHORUS_CHECK(checkComm(comm, "ncclRedOpCreatePreMulSum"));
  CHORUS_CHECK(checkPtr(op, "ncclRedOpCreatePreMulSum", "op"));
  CHORUS_CHECK(checkDatatype(enumValue(datatype), "ncclRedOpCreatePreMulSum"));
  const int where = enumValue(residence);
  if (where != ncclScalarDevice && where != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d", where);
  return comm->redops.create(datatype, scalar, residence, op);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclRedOpCreatePreMulSum)

CHORUS_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) try {
  CHORUS_CHECK(checkComm(comm, "ncclRedOpDestroy"));
  if (enumValue(op) < 0) return fail(ncclInvalidArgument, "ncclRedOpDestroy: invalid operator %d", enumValue(op));
  return comm->redops.destroy(op);
}
CHORUS_API_CATCH
CHORUS_EXPORT_ALIAS(ncclRedOpDestroy)
