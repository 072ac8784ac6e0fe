// ncclUniqueId: how ranks find the store. The id is 128 plain bytes (no
// pointers), so it can travel by file, pipe, fork or MPI_Bcast. Layout
// (little-endian):
//
//   0  u32 magic "CHID"      4  u16 version        6  u16 flags (bit 0: NCCL_COMM_ID mode)
//   8  16-byte secret        24 u64 host hash      32 u32 creator pid
//   36 u16 address family    38 u16 port           40 16-byte address (IPv4 uses 4)
//   56 u32 IPv6 scope id     60..127 zero
//
// Normal ids name a store server that ncclGetUniqueId started in the calling
// process, with a random secret. With NCCL_COMM_ID=host:port nothing is
// started: every process computes the same id (pid and host hash are left 0),
// and rank 0 starts the server
// when it connects. The secret then comes from CHORUS_COMM_SECRET or, when that
// is empty, is derived from the NCCL_COMM_ID string itself -- which anyone who
// knows the address can recompute, so it only protects against accidents
// (a stale job reusing the port), not against a hostile peer.
#pragma once

#include <memory>
#include <string>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "bootstrap/wire.h"
#include "core/host_identity.h"  // hostHash()
#include "nccl.h"

namespace chorus {

// ncclGetUniqueId: fills a random 16-byte secret + the address of a store server it starts in this
// process (listening on an interface chosen by NCCL_SOCKET_IFNAME rules; port 0 = ephemeral).
// If NCCL_COMM_ID=host:port is set, it starts nothing and returns an id naming that address, with
// the secret from CHORUS_COMM_SECRET or, when empty, derived deterministically from the NCCL_COMM_ID
// string (weaker, see above); then the rank 0 that calls connectStore starts the server.
ncclResult_t createUniqueId(ncclUniqueId* id);
// Returns a store for the id. If this process created the id's server (or is in NCCL_COMM_ID mode
// and rank==0 and must start it), returns the in-memory store directly (no sockets); otherwise
// connects by TCP (retrying until bound.deadline while the server is not up yet), authenticating
// with the secret. The server shuts down once it has had clients and all have disconnected
// (in-process users count as clients: ref-count via the returned shared_ptr).
ncclResult_t connectStore(const ncclUniqueId& id, int rank, const WaitBound& bound, std::shared_ptr<Store>* store);
// A readable "host:port" for log lines ("<invalid unique id>" when the magic is wrong).
std::string describeUniqueId(const ncclUniqueId& id);
bool isValidUniqueId(const ncclUniqueId& id);

// ---- Internals (also used by tests) ----

struct UniqueIdInfo {
  SockAddr addr;
  wire::Secret secret{};
  uint64_t hostHash = 0;
  uint32_t pid = 0;
  bool commIdMode = false;
};
void encodeUniqueId(const UniqueIdInfo& info, ncclUniqueId* id);
ncclResult_t decodeUniqueId(const ncclUniqueId& id, UniqueIdInfo* info);

// createUniqueId with the knobs passed explicitly (commId empty: start a server
// on the interface chosen by ifnameSpec).
ncclResult_t createUniqueIdFrom(const std::string& commId, const std::string& commSecret,
                                const std::string& ifnameSpec, ncclUniqueId* id);
// The NCCL_COMM_ID-mode secret (see the header comment).
wire::Secret deriveSecret(const std::string& commId, const std::string& commSecret);

}  // namespace chorus
