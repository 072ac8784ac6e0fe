// Turns an NCCL net plugin (an NcclNetDriver) into a chorusNet_v1_t, the one
// table the network transport drives. chorusNet_v1_t entries carry no
// context, so each adapted plugin occupies one of a fixed number of slots
// whose entry functions know their slot.
#pragma once

#include <memory>
#include <string>

#include "chorus/net_plugin.h"
#include "transports/net/nccl_net_driver.h"

namespace chorus {

// The adapted table for `driver`, loaded from `file`. Its init() initializes
// the plugin, checks the table it left behind and logs the plugin, its
// version and devices; a failure there is a WARN naming the file and reason.
ncclResult_t ncclNetAdapt(std::unique_ptr<NcclNetDriver> driver, const std::string& file, const chorusNet_v1_t** net);

// The NCCL table version behind an adapted backend, 0 for other backends.
int ncclNetAdaptedVersion(const chorusNet_v1_t* net);

// Calls finalize() of every initialized v11 plugin with no open connection
// (also run at process exit). Returns the number finalized.
int ncclNetFinalizeAdapted();

}  // namespace chorus
