#include "transports/net_ib/ib_verbs_api.h"

#ifdef CHORUS_HAVE_IBVERBS
#include <dlfcn.h>

#include <mutex>

#include "core/log.h"

namespace chorus::ib {
namespace {

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn* slot, bool required = true) {
  *slot = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*slot == nullptr && required) CHORUS_INFO(kLogNet, "NET/IB: libibverbs lacks %s; verbs backend disabled", symbol);
  return *slot != nullptr || !required;
}

const VerbsApi* loadApi() {
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    CHORUS_INFO(kLogNet, "NET/IB: cannot load libibverbs.so.1 (%s); no RDMA devices", dlerror());
    return nullptr;
  }
  static VerbsApi api{};
  bool ok = resolve(lib, "ibv_get_device_list", &api.getDeviceList) &&
            resolve(lib, "ibv_free_device_list", &api.freeDeviceList) &&
            resolve(lib, "ibv_get_device_name", &api.getDeviceName) &&
            resolve(lib, "ibv_open_device", &api.openDevice) && resolve(lib, "ibv_close_device", &api.closeDevice) &&
            resolve(lib, "ibv_query_device", &api.queryDevice) && resolve(lib, "ibv_query_port", &api.queryPort) &&
            resolve(lib, "ibv_alloc_pd", &api.allocPd) && resolve(lib, "ibv_dealloc_pd", &api.deallocPd) &&
            resolve(lib, "ibv_reg_mr", &api.regMr) &&
            resolve(lib, "ibv_reg_dmabuf_mr", &api.regDmabufMr, /*required=*/false) &&
            resolve(lib, "ibv_dereg_mr", &api.deregMr) && resolve(lib, "ibv_create_cq", &api.createCq) &&
            resolve(lib, "ibv_destroy_cq", &api.destroyCq) && resolve(lib, "ibv_create_qp", &api.createQp) &&
            resolve(lib, "ibv_destroy_qp", &api.destroyQp) && resolve(lib, "ibv_modify_qp", &api.modifyQp);
  return ok ? &api : nullptr;
}

}  // namespace

const VerbsApi* verbsApi() {
  static std::once_flag once;
  static const VerbsApi* loaded = nullptr;
  std::call_once(once, [] { loaded = loadApi(); });
  return loaded;
}

}  // namespace chorus::ib
#endif  // CHORUS_HAVE_IBVERBS
