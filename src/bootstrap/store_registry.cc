#include "bootstrap/store_registry.h"

#include <pthread.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <thread>

#include "bootstrap/tcp_store_client.h"
#include "bootstrap/unique_id.h"
#include "core/params.h"
#include "core/result.h"

namespace chorus {
namespace {

struct Entry {
  std::shared_ptr<TcpStoreServer> server;  // null once it has shut down
  pid_t pid = 0;                           // entries copied into a forked child are not the child's
};

struct Registry {
  std::mutex mu;  // held only around map operations, never while starting or joining a server
  std::map<std::string, Entry> entries;
};

Registry& registry() {
  // Never destroyed: a server may outlive main() while remote ranks still use it.
  static Registry* reg = [] {
    auto* r = new Registry;
    pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); }, [] { registry().mu.unlock(); });
    return r;
  }();
  return *reg;
}

std::string keyOf(const SockAddr& addr, const wire::Secret& secret) {
  return addr.str() + "|" + std::string(secret.begin(), secret.end());
}

// Drops finished servers (keeping a tombstone). The servers are returned so
// that their threads are joined after the registry lock is released.
std::vector<std::shared_ptr<TcpStoreServer>> reapLocked(Registry& r) {
  std::vector<std::shared_ptr<TcpStoreServer>> done;
  for (auto& [key, e] : r.entries)
    if (e.server != nullptr && e.server->finished()) done.push_back(std::move(e.server));
  return done;
}

struct Lookup {
  std::shared_ptr<TcpStoreServer> server;
  bool shutDown = false;  // this process served the id, and that server has stopped
};

Lookup lookup(const SockAddr& addr, const wire::Secret& secret) {
  Registry& r = registry();
  Lookup out;
  std::vector<std::shared_ptr<TcpStoreServer>> reaped;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    reaped = reapLocked(r);
    auto it = r.entries.find(keyOf(addr, secret));
    if (it != r.entries.end() && it->second.pid == getpid()) {
      out.server = it->second.server;
      out.shutDown = out.server == nullptr;
    }
  }
  return out;
}

// Rank 0 under NCCL_COMM_ID: serve the store at the agreed address.
ncclResult_t serveCommId(const UniqueIdInfo& info, std::shared_ptr<Store>* store) {
  SockAddr bound;
  if (startRegisteredServer(info.addr, info.secret, &bound) != ncclSuccess) {
    std::string why = lastErrorMessage();
    return fail(ncclSystemError, "bootstrap: rank 0 cannot serve the store at NCCL_COMM_ID address %s (%s)",
                info.addr.str().c_str(), why.c_str());
  }
  auto server = findRegisteredServer(bound, info.secret);
  *store = server ? server->attachLocal() : nullptr;
  if (*store == nullptr)
    return fail(ncclInternalError, "bootstrap: the store server at %s stopped as soon as it started",
                bound.str().c_str());
  return ncclSuccess;
}

}  // namespace

TcpStoreServer::Options serverOptionsFromParams() {
  TcpStoreServer::Options o;
  o.stallMs = std::max<int64_t>(100, params::bootstrapStallMs());
  return o;
}

ncclResult_t startRegisteredServer(const SockAddr& addr, const wire::Secret& secret, SockAddr* bound) {
  std::shared_ptr<TcpStoreServer> server;
  CHORUS_CHECK(TcpStoreServer::start(addr, secret, serverOptionsFromParams(), &server));
  *bound = server->address();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries[keyOf(*bound, secret)] = Entry{std::move(server), getpid()};
  return ncclSuccess;
}

std::shared_ptr<TcpStoreServer> findRegisteredServer(const SockAddr& addr, const wire::Secret& secret) {
  return lookup(addr, secret).server;
}

ncclResult_t connectStore(const ncclUniqueId& id, int rank, const WaitBound& bound, std::shared_ptr<Store>* store) {
  if (store == nullptr) return fail(ncclInvalidArgument, "bootstrap: connectStore needs an output pointer");
  UniqueIdInfo info;
  CHORUS_CHECK(decodeUniqueId(id, &info));
  Lookup found = lookup(info.addr, info.secret);
  if (found.server != nullptr) {
    *store = found.server->attachLocal();
    if (*store != nullptr) {
      CHORUS_TRACE(kLogBootstrap, "bootstrap: rank %d uses the in-process store for %s", rank, info.addr.str().c_str());
      return ncclSuccess;
    }
    // It began shutting down between the lookup and the attach. Under
    // NCCL_COMM_ID rank 0 will start a new one on the same port: let the old
    // one release it first (it exits within one poll round).
    found.shutDown = true;
    while (!found.server->finished() && Clock::now() < bound.deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (info.commIdMode && rank == 0) return serveCommId(info, store);
  if (found.shutDown && !info.commIdMode)
    return fail(ncclInvalidUsage,
                "bootstrap: the store server for unique id %s has already shut down (every rank that used it "
                "disconnected); create a new id with ncclGetUniqueId",
                info.addr.str().c_str());
  return connectTcpStore(info.addr, info.secret, rank, bound, store);
}

}  // namespace chorus
