// The UCP functions the UCX backend calls, resolved from libucp.so.0 with
// dlopen at run time so that the library loads on machines without UCX. The
// UCX headers are used only for types and constants.
#pragma once

#include <ucp/api/ucp.h>

#include "nccl.h"

namespace chorus::ucx {

struct UcpApi {
  ucs_status_t (*configRead)(const char*, const char*, ucp_config_t**);
  void (*configRelease)(ucp_config_t*);
  ucs_status_t (*configModify)(ucp_config_t*, const char*, const char*);
  ucs_status_t (*initVersion)(unsigned, unsigned, const ucp_params_t*, const ucp_config_t*, ucp_context_h*);
  void (*cleanup)(ucp_context_h);
  ucs_status_t (*contextQuery)(ucp_context_h, ucp_context_attr_t*);
  ucs_status_t (*workerCreate)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*);
  void (*workerDestroy)(ucp_worker_h);
  unsigned (*workerProgress)(ucp_worker_h);
  ucs_status_t (*listenerCreate)(ucp_worker_h, const ucp_listener_params_t*, ucp_listener_h*);
  void (*listenerDestroy)(ucp_listener_h);
  ucs_status_t (*listenerQuery)(ucp_listener_h, ucp_listener_attr_t*);
  ucs_status_t (*listenerReject)(ucp_listener_h, ucp_conn_request_h);
  ucs_status_t (*epCreate)(ucp_worker_h, const ucp_ep_params_t*, ucp_ep_h*);
  ucs_status_ptr_t (*epCloseNbx)(ucp_ep_h, const ucp_request_param_t*);
  ucs_status_ptr_t (*tagSendNbx)(ucp_ep_h, const void*, size_t, ucp_tag_t, const ucp_request_param_t*);
  ucs_status_ptr_t (*tagRecvNbx)(ucp_worker_h, void*, size_t, ucp_tag_t, ucp_tag_t, const ucp_request_param_t*);
  ucs_status_t (*tagRecvRequestTest)(void*, ucp_tag_recv_info_t*);
  ucs_status_ptr_t (*streamSendNbx)(ucp_ep_h, const void*, size_t, const ucp_request_param_t*);
  ucs_status_ptr_t (*streamRecvNbx)(ucp_ep_h, void*, size_t, size_t*, const ucp_request_param_t*);
  ucs_status_t (*streamRecvRequestTest)(void*, size_t*);
  ucs_status_t (*requestCheckStatus)(void*);
  void (*requestCancel)(ucp_worker_h, void*);
  void (*requestFree)(void*);
  const char* (*statusString)(ucs_status_t);
};

// The process-wide table, loaded on first use. Returns nullptr (after an INFO
// line saying why) when libucp or one of its symbols is missing.
const UcpApi* ucpApi();

}  // namespace chorus::ucx
