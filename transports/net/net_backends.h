// The registry of network backends: the built-in ones (IB verbs, Socket, and
// UCX when compiled in) plus at most one external plugin loaded with
// NCCL_NET_PLUGIN. Chooses the backend communicators use (NCCL_NET, else
// preference order) and initializes each backend once per process.
#pragma once

#include <string>
#include <vector>

#include "chorus/net_plugin.h"
#include "nccl.h"

namespace chorus {

// The backend new connections use, initialized, with its device count (> 0).
// `netName` (a communicator's ncclConfig_t.netName) overrides NCCL_NET when
// not empty. Re-evaluated when NCCL_NET or NCCL_NET_PLUGIN change; logs each
// new choice at INFO.
ncclResult_t netChooseBackend(const chorusNet_v1_t** net, int* ndev, const std::string& netName = "");

// Loads an external backend: `spec` is a path, or a name X tried as
// libchorus-net-X.so. On failure returns an error with the reason (missing
// file, missing chorusNetPlugin_v1, wrong version, missing entries) in
// lastErrorMessage(). Libraries stay loaded; loading the same spec again
// returns the same table.
ncclResult_t netLoadPlugin(const std::string& spec, const chorusNet_v1_t** net);

// Built-in backends in preference order (the UCX one only when compiled in).
std::vector<const chorusNet_v1_t*> netBuiltinBackends();

// init() once per process and backend; the device count (0 when init failed).
ncclResult_t netInitBackend(const chorusNet_v1_t* net, int* ndev);

// The logger handed to every backend's init(): routes into the NET subsystem.
void netPluginLog(chorusNetLogLevel_t level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace chorus
