#include "transports/net_ucx/ucx_worker.h"

#include <cstdlib>
#include <string>

#include "core/log.h"
#include "core/params.h"
#include "core/result.h"

namespace chorus::ucx {
namespace {

std::mutex gRegistryMu;
UcxWorker* gWorker = nullptr;  // guarded by gRegistryMu

ncclResult_t createContext(const UcpApi* api, ucp_context_h* context) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = api->configRead(nullptr, nullptr, &config);  // honours UCX_TLS, UCX_NET_DEVICES, ...
  if (st != UCS_OK) return fail(ncclSystemError, "NET/UCX: ucp_config_read: %s", api->statusString(st));
  // Every message is one connector slot (CHORUS_SLOT_BYTES, 128 KiB by
  // default). UCX's own rendezvous threshold sends such messages with a
  // handshake round trip each, so unless the user set UCX_RNDV_THRESH we use
  // CHORUS_UCX_RNDV_THRESH.
  const std::string rndv = params::ucxRndvThresh();
  if (std::getenv("UCX_RNDV_THRESH") == nullptr && !rndv.empty()) {
    st = api->configModify(config, "RNDV_THRESH", rndv.c_str());
    if (st != UCS_OK)
      CHORUS_WARN(kLogNet, "NET/UCX: CHORUS_UCX_RNDV_THRESH=%s rejected by UCX (%s); using UCX's default",
                  rndv.c_str(), api->statusString(st));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM;
  params.mt_workers_shared = 0;
  st = api->initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, config, context);
  api->configRelease(config);
  if (st != UCS_OK) return fail(ncclSystemError, "NET/UCX: ucp_init: %s", api->statusString(st));
  return ncclSuccess;
}

ncclResult_t createWorker(UcxWorker* w) {
  CHORUS_CHECK(createContext(w->api, &w->context));
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucs_status_t st = w->api->workerCreate(w->context, &params, &w->worker);
  if (st != UCS_OK) {
    w->api->cleanup(w->context);
    return fail(ncclSystemError, "NET/UCX: ucp_worker_create: %s", w->api->statusString(st));
  }
  return ncclSuccess;
}

}  // namespace

void UcxWorker::progress() {
  constexpr int kMaxRounds = 64;
  for (int i = 0; i < kMaxRounds && api->workerProgress(worker) != 0; ++i) {
  }
}

uint32_t UcxWorker::nextConnId() {
  if (++lastConnId == 0) ++lastConnId;
  return lastConnId;
}

ncclResult_t UcxWorkerRegistry::acquire(UcxWorker** out) {
  std::lock_guard<std::mutex> lock(gRegistryMu);
  if (gWorker == nullptr) {
    const UcpApi* api = ucpApi();
    if (api == nullptr) return fail(ncclSystemError, "NET/UCX: libucp is not available");
    auto* w = new UcxWorker;
    w->api = api;
    ncclResult_t res = createWorker(w);
    if (res != ncclSuccess) {
      delete w;
      return res;
    }
    gWorker = w;
  }
  ++gWorker->users;
  *out = gWorker;
  return ncclSuccess;
}

void UcxWorkerRegistry::release(UcxWorker* worker) {
  std::lock_guard<std::mutex> lock(gRegistryMu);
  if (worker == nullptr || worker != gWorker || --worker->users > 0) return;
  if (worker->stuckCloses > 0) {
    // UCX aborts when a worker is destroyed under a closing endpoint; keep it.
    CHORUS_WARN(kLogNet, "NET/UCX: keeping the UCX worker alive: %d endpoint close(s) never finished",
                worker->stuckCloses);
    return;
  }
  worker->api->workerDestroy(worker->worker);
  worker->api->cleanup(worker->context);
  delete worker;
  gWorker = nullptr;
}

bool ucxSupportsCudaMemory() {
  static std::once_flag once;
  static bool cuda = false;
  std::call_once(once, [] {
    const UcpApi* api = ucpApi();
    ucp_context_h context = nullptr;
    if (api == nullptr || createContext(api, &context) != ncclSuccess) return;
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (api->contextQuery(context, &attr) == UCS_OK) cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    api->cleanup(context);
  });
  return cuda;
}

}  // namespace chorus::ucx
