// Backend selection and plugin loading (rules in docs/net.md):
//  - NCCL_NET_PLUGIN=<path|name> loads an external backend ("none": skip);
//    unset, libnccl-net.so is tried from the library search path and its
//    absence is only an INFO line. A name X is tried as given, then as
//    libnccl-net-X.so and libchorus-net-X.so. The library may export Chorus's
//    chorusNetPlugin_v1 or one of NCCL's ncclNetPlugin_v11 ... _v6 tables
//    (newest first; adapted by nccl_net_adapter.cc). A library that cannot
//    be loaded, exports no known table or a broken one is reported at WARN
//    naming the file and reason, and the built-ins are used instead.
//  - NCCL_NET=<name> (case-insensitive) picks one backend by name among the
//    plugin and the built-ins; an unknown name is an error listing them.
//  - Otherwise: the plugin when it has devices, else IB when it has devices,
//    else Socket. UCX is used only when asked for by name.
#include "transports/net/net_backends.h"

#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>

#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>
#include <new>

#include "core/log.h"
#include "core/params.h"
#include "core/result.h"
#include "transports/net/nccl_net_adapter.h"
#include "transports/net/nccl_net_driver.h"
#include "transports/net_ib/ib_backend.h"
#include "transports/net_socket/socket_backend.h"
#ifdef CHORUS_HAVE_UCX
#include "transports/net_ucx/ucx_backend.h"
#endif

namespace chorus {
namespace {

constexpr const char* kDefaultPlugin = "libnccl-net.so";

struct InitState {
  ncclResult_t result = ncclSuccess;
  int ndev = 0;
};

// Process-wide registry of what was loaded and initialized. Never destroyed:
// the proxy thread may use backends until the process ends.
struct BackendRegistry {
  std::recursive_mutex mu;
  std::map<const chorusNet_v1_t*, InitState> inits;
  std::map<std::string, const chorusNet_v1_t*> plugins;  // by NCCL_NET_PLUGIN value
  // By "<wanted name>|<NCCL_NET_PLUGIN>": the backend and its device count.
  std::map<std::string, std::pair<const chorusNet_v1_t*, int>> choices;
};

BackendRegistry& registry() {
  static BackendRegistry* r = [] {
    auto* reg = new BackendRegistry;
    // A fork while another thread holds the lock must not leave it locked in
    // the child. A recursive mutex cannot be unlocked there (its owner is the
    // parent's thread id), so the child gets a fresh one.
    pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); },
                   [] { new (&registry().mu) std::recursive_mutex(); });
    return reg;
  }();
  return *r;
}

const char* missingEntry(const chorusNet_v1_t& n) {
  if (n.name == nullptr) return "name";
  if (n.init == nullptr) return "init";
  if (n.devices == nullptr) return "devices";
  if (n.getProperties == nullptr) return "getProperties";
  if (n.listen == nullptr) return "listen";
  if (n.connect == nullptr) return "connect";
  if (n.accept == nullptr) return "accept";
  if (n.regMr == nullptr) return "regMr";
  if (n.deregMr == nullptr) return "deregMr";
  if (n.isend == nullptr) return "isend";
  if (n.irecv == nullptr) return "irecv";
  if (n.test == nullptr) return "test";
  if (n.closeSend == nullptr) return "closeSend";
  if (n.closeRecv == nullptr) return "closeRecv";
  if (n.closeListen == nullptr) return "closeListen";
  return nullptr;
}

bool isPath(const std::string& spec) { return spec.find('/') != std::string::npos; }

// dlopen of `spec` in NCCL's forms; *tried lists every name with dlerror().
void* openLibrary(const std::string& spec, std::string* tried, std::string* file) {
  std::vector<std::string> names = {spec};
  if (!isPath(spec)) {
    names.push_back("libnccl-net-" + spec + ".so");
    names.push_back("libchorus-net-" + spec + ".so");
  }
  for (const std::string& n : names) {
    void* lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      *file = n;
      return lib;
    }
    const char* err = dlerror();
    *tried += (tried->empty() ? "" : "; ") + (err != nullptr ? std::string(err) : n + ": not found");
  }
  return nullptr;
}

// The default plugin of NCCL: libnccl-net.so when it is on the search path.
const chorusNet_v1_t* defaultPlugin() {
  static const chorusNet_v1_t* cached = nullptr;
  static bool tried = false;
  if (tried) return cached;
  tried = true;
  void* lib = dlopen(kDefaultPlugin, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(kDefaultPlugin, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    CHORUS_INFO(kLogNet | kLogInit, "net: NCCL_NET_PLUGIN unset and no %s on the library path: built-in backends only",
                kDefaultPlugin);
    return nullptr;
  }
  dlclose(lib);
  if (netLoadPlugin(kDefaultPlugin, &cached) != ncclSuccess) {
    CHORUS_WARN(kLogNet, "net: using the built-in backends instead of %s", kDefaultPlugin);
    cached = nullptr;
  }
  return cached;
}

// Plugin named by NCCL_NET_PLUGIN, or nullptr (none asked for, or it failed: WARNed).
const chorusNet_v1_t* pluginFromEnv() {
  const std::string spec = params::netPlugin();
  if (spec.empty()) return defaultPlugin();
  if (strcasecmp(spec.c_str(), "none") == 0) return nullptr;
  const chorusNet_v1_t* net = nullptr;
  if (netLoadPlugin(spec, &net) != ncclSuccess) {
    CHORUS_WARN(kLogNet, "net: using the built-in backends instead of NCCL_NET_PLUGIN=%s", spec.c_str());
    return nullptr;
  }
  return net;
}

std::string describeAvailable(const std::vector<const chorusNet_v1_t*>& all) {
  std::string s;
  for (const chorusNet_v1_t* n : all) {
    int ndev = 0;
    netInitBackend(n, &ndev);
    s += (s.empty() ? "" : ", ") + std::string(n->name) + " (" + std::to_string(ndev) + " devices)";
  }
  return s;
}

ncclResult_t chooseByName(const std::string& want, const char* source, const std::vector<const chorusNet_v1_t*>& all,
                          const chorusNet_v1_t** net, int* ndev, std::string* why) {
  for (const chorusNet_v1_t* n : all) {
    if (strcasecmp(n->name, want.c_str()) != 0) continue;
    ncclResult_t res = netInitBackend(n, ndev);
    if (res != ncclSuccess)
      return fail(res, "net: %s=%s: the %s backend failed to initialize: %s", source, want.c_str(), n->name,
                  lastErrorMessage());
    if (*ndev <= 0)
      return fail(ncclSystemError, "net: %s=%s: the %s backend has no devices", source, want.c_str(), n->name);
    *net = n;
    *why = std::string("selected by ") + source + "=" + want;
    return ncclSuccess;
  }
  return fail(ncclInvalidArgument, "net: %s=%s names no network backend; available: %s", source, want.c_str(),
              describeAvailable(all).c_str());
}

ncclResult_t chooseByPreference(const chorusNet_v1_t* plugin, const chorusNet_v1_t** net, int* ndev, std::string* why) {
  std::vector<std::pair<const chorusNet_v1_t*, const char*>> order;
  if (plugin != nullptr) order.push_back({plugin, "external plugin from NCCL_NET_PLUGIN"});
  order.push_back({netIbBackend(), "RDMA devices present"});
  order.push_back({netSocketBackend(), "no RDMA device; TCP sockets"});
  std::string skipped;
  for (const auto& [n, reason] : order) {
    int count = 0;
    ncclResult_t res = netInitBackend(n, &count);
    if (res == ncclSuccess && count > 0) {
      *net = n;
      *ndev = count;
      *why = reason;
      if (!skipped.empty()) *why += " (skipped: " + skipped + ")";
      return ncclSuccess;
    }
    skipped +=
        (skipped.empty() ? "" : ", ") + std::string(n->name) + (res == ncclSuccess ? ": no devices" : ": init failed");
  }
  return fail(ncclSystemError, "net: no network backend has a usable device (%s)", skipped.c_str());
}

// A Chorus table, or an NCCL table wrapped by the adapter.
ncclResult_t tableFromLibrary(void* lib, const std::string& spec, const std::string& file, const chorusNet_v1_t** out) {
  if (auto* table = static_cast<const chorusNet_v1_t*>(dlsym(lib, CHORUS_NET_PLUGIN_SYMBOL))) {
    if (table->version != CHORUS_NET_API_VERSION)
      return fail(ncclSystemError,
                  "net: NCCL_NET_PLUGIN=%s (%s): built for net API version %d, this library needs version %d",
                  spec.c_str(), file.c_str(), table->version, CHORUS_NET_API_VERSION);
    if (const char* missing = missingEntry(*table))
      return fail(ncclSystemError, "net: NCCL_NET_PLUGIN=%s (%s): required entry '%s' is empty", spec.c_str(),
                  file.c_str(), missing);
    CHORUS_INFO(kLogNet | kLogInit, "net: loaded plugin backend '%s' (%s) from %s", table->name,
                CHORUS_NET_PLUGIN_SYMBOL, file.c_str());
    *out = table;
    return ncclSuccess;
  }
  std::string symbol, why;
  std::unique_ptr<NcclNetDriver> driver = ncclNetDriverFromLibrary(lib, &symbol, &why);
  if (driver == nullptr)
    return fail(ncclSystemError, "net: NCCL_NET_PLUGIN=%s (%s): %s", spec.c_str(), file.c_str(), why.c_str());
  CHORUS_INFO(kLogNet | kLogInit, "net: loaded NCCL net plugin '%s' (%s) from %s", driver->name(), symbol.c_str(),
              file.c_str());
  return ncclNetAdapt(std::move(driver), file, out);
}

}  // namespace

void netPluginLog(chorusNetLogLevel_t level, const char* file, int line, const char* fmt, ...) {
  const LogLevel l = level == CHORUS_NET_LOG_WARN   ? LogLevel::Warn
                     : level == CHORUS_NET_LOG_INFO ? LogLevel::Info
                                                    : LogLevel::Trace;
  if (!logEnabled(l, kLogNet)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  logMessage(l, kLogNet, file != nullptr ? file : "net-plugin", line, "%s", msg);
}

std::vector<const chorusNet_v1_t*> netBuiltinBackends() {
  std::vector<const chorusNet_v1_t*> all = {netIbBackend(), netSocketBackend()};
#ifdef CHORUS_HAVE_UCX
  all.push_back(netUcxBackend());
#endif
  return all;
}

ncclResult_t netInitBackend(const chorusNet_v1_t* net, int* ndev) {
  BackendRegistry& reg = registry();
  std::lock_guard<std::recursive_mutex> lock(reg.mu);
  auto it = reg.inits.find(net);
  if (it == reg.inits.end()) {
    InitState st;
    st.result = net->init(netPluginLog);
    if (st.result == ncclSuccess) st.result = net->devices(&st.ndev);
    if (st.result != ncclSuccess) {
      st.ndev = 0;
      CHORUS_INFO(kLogNet, "net: backend %s unavailable (init error %d)", net->name, st.result);
    }
    it = reg.inits.emplace(net, st).first;
  }
  *ndev = it->second.ndev;
  return it->second.result;
}

ncclResult_t netLoadPlugin(const std::string& spec, const chorusNet_v1_t** net) {
  BackendRegistry& reg = registry();
  std::lock_guard<std::recursive_mutex> lock(reg.mu);
  auto cached = reg.plugins.find(spec);
  if (cached != reg.plugins.end()) {
    *net = cached->second;
    return ncclSuccess;
  }
  std::string tried;
  std::string file;
  void* lib = openLibrary(spec, &tried, &file);
  if (lib == nullptr)
    return fail(ncclSystemError, "net: NCCL_NET_PLUGIN=%s: cannot load it (%s)", spec.c_str(), tried.c_str());
  const chorusNet_v1_t* table = nullptr;
  ncclResult_t res = tableFromLibrary(lib, spec, file, &table);
  if (res != ncclSuccess) {
    dlclose(lib);
    return res;
  }
  reg.plugins[spec] = table;  // never dlclose'd: connections may outlive any one communicator
  *net = table;
  return ncclSuccess;
}

ncclResult_t netChooseBackend(const chorusNet_v1_t** net, int* ndev, const std::string& netName) {
  BackendRegistry& reg = registry();
  std::lock_guard<std::recursive_mutex> lock(reg.mu);
  const std::string want = netName.empty() ? params::net() : netName;
  const std::string key = want + "|" + params::netPlugin();
  auto cached = reg.choices.find(key);
  if (cached != reg.choices.end()) {
    *net = cached->second.first;
    *ndev = cached->second.second;
    return ncclSuccess;
  }
  const chorusNet_v1_t* plugin = pluginFromEnv();
  std::string why;
  if (!want.empty()) {
    std::vector<const chorusNet_v1_t*> all;
    if (plugin != nullptr) {
      int pluginDevices = 0;
      netInitBackend(plugin, &pluginDevices);  // a plugin may rename itself in init
      all.push_back(plugin);
    }
    for (const chorusNet_v1_t* n : netBuiltinBackends()) all.push_back(n);
    CHORUS_CHECK(chooseByName(want, netName.empty() ? "NCCL_NET" : "ncclConfig_t.netName", all, net, ndev, &why));
  } else {
    CHORUS_CHECK(chooseByPreference(plugin, net, ndev, &why));
  }
  CHORUS_INFO(kLogNet | kLogInit, "net: using the %s backend with %d device(s): %s", (*net)->name, *ndev, why.c_str());
  reg.choices[key] = {*net, *ndev};
  return ncclSuccess;
}

}  // namespace chorus
