// Slots that expose NCCL plugins as chorusNet_v1_t tables. Every entry
// forwards to the slot's driver; a plugin error becomes a Chorus error whose
// message names the plugin, the call and the code.
#include "transports/net/nccl_net_adapter.h"

#include <atomic>
#include <cstdarg>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/log.h"
#include "core/result.h"

namespace chorus {
namespace {

constexpr int kSlots = 16;

struct Slot {
  std::unique_ptr<NcclNetDriver> driver;
  std::string file;
  std::string name;   // the table's name after init (the plugin may rename itself)
  std::string label;  // "'name' (ncclNet_vN from file)" for messages
  chorusNet_v1_t table{};
  int ndev = 0;
  bool initialized = false;
  bool finalized = false;
  std::atomic<int> openComms{0};
};

Slot gSlots[kSlots];
std::mutex gSlotsMu;

ncclResult_t pluginError(Slot& s, const char* what, ncclResult_t res) {
  if (res == ncclSuccess) return res;
  return failQuiet(res, kLogNet, "net: NCCL plugin %s: %s returned error %d", s.label.c_str(), what, res);
}

std::string ptrSupportText(int bits) {
  std::string s;
  if (bits & NCCL_PTR_HOST) s += "host";
  if (bits & NCCL_PTR_CUDA) s += s.empty() ? "cuda" : "+cuda";
  if (bits & NCCL_PTR_DMABUF) s += s.empty() ? "dmabuf" : "+dmabuf";
  return s.empty() ? "none" : s;
}

// Reads every device's properties; the description for the log, and whether any takes host memory.
ncclResult_t probeDevices(Slot& s, std::string* desc, bool* anyHost) {
  *anyHost = false;
  for (int d = 0; d < s.ndev; ++d) {
    chorusNetProperties_v1_t p{};
    int maxRecvs = 0;
    ncclResult_t res = s.driver->getProperties(d, &p, &maxRecvs);
    if (res != ncclSuccess)
      return fail(res, "net: NCCL_NET_PLUGIN %s: getProperties(%d) returned error %d", s.label.c_str(), d, res);
    if (p.ptrSupport & NCCL_PTR_HOST) *anyHost = true;
    *desc += (d ? ", " : "") + std::to_string(d) + ":" + (p.name ? p.name : "?") + " [" + ptrSupportText(p.ptrSupport) +
             ", " + std::to_string(p.speedMbps) + " Mbps, maxRecvs " + std::to_string(maxRecvs) + "]";
  }
  return ncclSuccess;
}

void finalizeAtExit() { ncclNetFinalizeAdapted(); }

ncclResult_t slotInit(Slot& s, ncclDebugLogger_t logger) {
  ncclResult_t res = s.driver->init(logger);
  if (res != ncclSuccess) return fail(res, "net: NCCL_NET_PLUGIN %s: init returned error %d", s.label.c_str(), res);
  s.initialized = true;
  if (s.driver->hasFinalize()) {
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(finalizeAtExit); });
  }
  if (const char* missing = s.driver->missingEntry())
    return fail(ncclSystemError, "net: NCCL_NET_PLUGIN %s: entry '%s' is NULL after init", s.label.c_str(), missing);
  // The table as init left it: read through the symbol, so a plugin that
  // fills in (or clears) regMrDmaBuf in init is seen as it is now.
  if (!s.driver->hasRegMrDmaBuf()) s.table.regMrDmaBuf = nullptr;
  s.name = s.driver->name();
  s.table.name = s.name.c_str();
  s.label = "'" + s.name + "' (ncclNet_v" + std::to_string(s.driver->version()) + " from " + s.file + ")";
  int ndev = 0;
  res = s.driver->devices(&ndev);
  if (res != ncclSuccess) return fail(res, "net: NCCL_NET_PLUGIN %s: devices returned error %d", s.label.c_str(), res);
  s.ndev = ndev < 0 ? 0 : ndev;
  if (s.ndev == 0) {
    CHORUS_INFO(kLogNet | kLogInit, "net: NCCL plugin %s has no devices; skipped", s.label.c_str());
    return ncclSuccess;
  }
  std::string desc;
  bool anyHost = false;
  CHORUS_CHECK(probeDevices(s, &desc, &anyHost));
  if (!anyHost) {
    CHORUS_INFO(kLogNet | kLogInit,
                "net: NCCL plugin %s: no device takes host memory (%s); Chorus keeps host-mode FIFOs, and GPU-mode "
                "ones outside NCCL_NET_GDR_LEVEL, in host memory; skipped",
                s.label.c_str(), desc.c_str());
    s.ndev = 0;
    return ncclSuccess;
  }
  CHORUS_INFO(kLogNet | kLogInit, "net: NCCL plugin %s: %d device(s): %s", s.label.c_str(), s.ndev, desc.c_str());
  return ncclSuccess;
}

ncclResult_t opened(Slot& s, void* comm, ncclResult_t res) {
  if (res == ncclSuccess && comm != nullptr) s.openComms.fetch_add(1);
  return res;
}

ncclResult_t closed(Slot& s, ncclResult_t res) {
  s.openComms.fetch_sub(1);
  return res;
}

// The entries of slot S's table.
template <int S>
struct Entries {
  static Slot& slot() { return gSlots[S]; }
  static NcclNetDriver& d() { return *gSlots[S].driver; }

  static void log(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ncclNetPluginVlog(slot().name.c_str(), level, flags, file, line, fmt, ap);
    va_end(ap);
  }
  static ncclResult_t init(chorusNetLogFn_t) { return slotInit(slot(), log); }
  static ncclResult_t devices(int* ndev) {
    *ndev = slot().ndev;
    return ncclSuccess;
  }
  static ncclResult_t getProperties(int dev, chorusNetProperties_v1_t* props) {
    int maxRecvs = 0;
    return pluginError(slot(), "getProperties", d().getProperties(dev, props, &maxRecvs));
  }
  static ncclResult_t listen(int dev, void* handle, void** listenComm) {
    *listenComm = nullptr;
    const ncclResult_t res = pluginError(slot(), "listen", d().listen(dev, handle, listenComm));
    return opened(slot(), *listenComm, res);
  }
  static ncclResult_t connect(int dev, const void* handle, void** sendComm) {
    *sendComm = nullptr;
    const ncclResult_t res = pluginError(slot(), "connect", d().connect(dev, handle, sendComm));
    return opened(slot(), *sendComm, res);
  }
  static ncclResult_t accept(void* listenComm, void** recvComm) {
    *recvComm = nullptr;
    const ncclResult_t res = pluginError(slot(), "accept", d().accept(listenComm, recvComm));
    return opened(slot(), *recvComm, res);
  }
  static ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mh) {
    return pluginError(slot(), "regMr", d().regMr(comm, data, size, type, mh));
  }
  static ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mh) {
    if (!d().hasRegMrDmaBuf())
      return fail(ncclInvalidUsage, "net: NCCL plugin %s has no regMrDmaBuf", slot().label.c_str());
    return pluginError(slot(), "regMrDmaBuf", d().regMrDmaBuf(comm, data, size, type, offset, fd, mh));
  }
  static ncclResult_t deregMr(void* comm, void* mh) { return pluginError(slot(), "deregMr", d().deregMr(comm, mh)); }
  static ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
    *req = nullptr;
    return pluginError(slot(), "isend", d().isend(comm, data, size, tag, mh, req));
  }
  static ncclResult_t irecv(void* comm, void* data, size_t size, int tag, void* mh, void** req) {
    *req = nullptr;
    return pluginError(slot(), "irecv", d().irecv(comm, data, size, tag, mh, req));
  }
  static ncclResult_t iflush(void* comm, void* data, size_t size, void* mh, void** req) {
    return pluginError(slot(), "iflush", d().iflush(comm, data, size, mh, req));
  }
  static ncclResult_t test(void* req, int* done, size_t* size) {
    return pluginError(slot(), "test", d().test(req, done, size));
  }
  static ncclResult_t closeSend(void* c) { return closed(slot(), pluginError(slot(), "closeSend", d().closeSend(c))); }
  static ncclResult_t closeRecv(void* c) { return closed(slot(), pluginError(slot(), "closeRecv", d().closeRecv(c))); }
  static ncclResult_t closeListen(void* c) {
    return closed(slot(), pluginError(slot(), "closeListen", d().closeListen(c)));
  }

  // regMrDmaBuf is offered until init, which may fill in or clear the
  // plugin's own entry; slotInit then keeps it only if the plugin has one.
  static chorusNet_v1_t table() {
    chorusNet_v1_t t{};
    t.version = CHORUS_NET_API_VERSION;
    t.init = init;
    t.devices = devices;
    t.getProperties = getProperties;
    t.listen = listen;
    t.connect = connect;
    t.accept = accept;
    t.regMr = regMr;
    t.regMrDmaBuf = regMrDmaBuf;
    t.deregMr = deregMr;
    t.isend = isend;
    t.irecv = irecv;
    t.iflush = iflush;
    t.test = test;
    t.closeSend = closeSend;
    t.closeRecv = closeRecv;
    t.closeListen = closeListen;
    return t;
  }
};

template <int... S>
chorusNet_v1_t tableForSlot(int slot, std::integer_sequence<int, S...>) {
  chorusNet_v1_t out{};
  ((slot == S ? (out = Entries<S>::table(), 0) : 0), ...);
  return out;
}

}  // namespace

ncclResult_t ncclNetAdapt(std::unique_ptr<NcclNetDriver> driver, const std::string& file, const chorusNet_v1_t** net) {
  std::lock_guard<std::mutex> lock(gSlotsMu);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = gSlots[i];
    if (s.driver != nullptr) continue;
    s.file = file;
    s.name = driver->name();
    s.label = "'" + s.name + "' (ncclNet_v" + std::to_string(driver->version()) + " from " + file + ")";
    s.driver = std::move(driver);
    s.table = tableForSlot(i, std::make_integer_sequence<int, kSlots>{});
    s.table.name = s.name.c_str();
    *net = &s.table;
    return ncclSuccess;
  }
  return fail(ncclSystemError, "net: NCCL_NET_PLUGIN %s: more than %d NCCL plugins loaded in this process",
              file.c_str(), kSlots);
}

int ncclNetAdaptedVersion(const chorusNet_v1_t* net) {
  for (Slot& s : gSlots)
    if (net == &s.table && s.driver != nullptr) return s.driver->version();
  return 0;
}

int ncclNetFinalizeAdapted() {
  int n = 0;
  for (Slot& s : gSlots) {
    if (s.driver == nullptr || !s.initialized || s.finalized || !s.driver->hasFinalize() || s.openComms.load() > 0)
      continue;
    s.finalized = true;
    if (s.driver->finalize() != ncclSuccess)
      CHORUS_WARN(kLogNet, "net: NCCL plugin %s: finalize returned an error", s.label.c_str());
    ++n;
  }
  return n;
}

}  // namespace chorus
