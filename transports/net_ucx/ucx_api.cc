#include "transports/net_ucx/ucx_api.h"

#include <dlfcn.h>

#include <mutex>

#include "core/log.h"

namespace chorus::ucx {
namespace {

// Resolves one symbol into `slot`; false (and an INFO line) when it is absent.
template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn* slot) {
  *slot = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*slot == nullptr) CHORUS_INFO(kLogNet, "NET/UCX: libucp lacks %s; UCX backend disabled", symbol);
  return *slot != nullptr;
}

bool resolveAll(void* lib, UcpApi* api) {
  return resolve(lib, "ucp_config_read", &api->configRead) && resolve(lib, "ucp_config_release", &api->configRelease) &&
         resolve(lib, "ucp_config_modify", &api->configModify) &&
         resolve(lib, "ucp_init_version", &api->initVersion) && resolve(lib, "ucp_cleanup", &api->cleanup) &&
         resolve(lib, "ucp_context_query", &api->contextQuery) &&
         resolve(lib, "ucp_worker_create", &api->workerCreate) &&
         resolve(lib, "ucp_worker_destroy", &api->workerDestroy) &&
         resolve(lib, "ucp_worker_progress", &api->workerProgress) &&
         resolve(lib, "ucp_listener_create", &api->listenerCreate) &&
         resolve(lib, "ucp_listener_destroy", &api->listenerDestroy) &&
         resolve(lib, "ucp_listener_query", &api->listenerQuery) &&
         resolve(lib, "ucp_listener_reject", &api->listenerReject) && resolve(lib, "ucp_ep_create", &api->epCreate) &&
         resolve(lib, "ucp_ep_close_nbx", &api->epCloseNbx) && resolve(lib, "ucp_tag_send_nbx", &api->tagSendNbx) &&
         resolve(lib, "ucp_tag_recv_nbx", &api->tagRecvNbx) &&
         resolve(lib, "ucp_tag_recv_request_test", &api->tagRecvRequestTest) &&
         resolve(lib, "ucp_stream_send_nbx", &api->streamSendNbx) &&
         resolve(lib, "ucp_stream_recv_nbx", &api->streamRecvNbx) &&
         resolve(lib, "ucp_stream_recv_request_test", &api->streamRecvRequestTest) &&
         resolve(lib, "ucp_request_check_status", &api->requestCheckStatus) &&
         resolve(lib, "ucp_request_cancel", &api->requestCancel) &&
         resolve(lib, "ucp_request_free", &api->requestFree) && resolve(lib, "ucs_status_string", &api->statusString);
}

const UcpApi* loadApi() {
  // RTLD_GLOBAL: UCX loads its transport modules (libuct_*.so) itself and
  // they resolve symbols of libucs/libuct through the global scope.
  void* lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    CHORUS_INFO(kLogNet, "NET/UCX: cannot load libucp.so.0 (%s); UCX backend has no devices", dlerror());
    return nullptr;
  }
  static UcpApi api{};
  if (!resolveAll(lib, &api)) return nullptr;  // the library stays loaded: unloading UCX is not safe
  return &api;
}

}  // namespace

const UcpApi* ucpApi() {
  static std::once_flag once;
  static const UcpApi* loaded = nullptr;
  std::call_once(once, [] { loaded = loadApi(); });
  return loaded;
}

}  // namespace chorus::ucx
