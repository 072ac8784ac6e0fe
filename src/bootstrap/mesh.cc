#include "bootstrap/mesh.h"

#include <netinet/in.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/store_registry.h"
#include "bootstrap/tcp_store_client.h"
#include "bootstrap/tcp_store_server.h"
#include "core/log.h"
#include "core/result.h"

namespace chorus {
namespace {

// How long a refused connection to a peer's mailbox is retried. The mailbox
// listened before its address was published, so a refusal means the process
// is gone: retry only briefly. (A busy mailbox's handshake may take longer;
// that wait is bounded by the caller only.)
constexpr int64_t kPeerConnectMs = 1000;

struct MeshRegistry {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<Mesh>> meshes;  // key: pid + secret
};

MeshRegistry& meshRegistry() {
  static MeshRegistry* reg = [] {  // never destroyed: meshes may outlive main()
    auto* r = new MeshRegistry;
    pthread_atfork([] { meshRegistry().mu.lock(); }, [] { meshRegistry().mu.unlock(); },
                   [] { meshRegistry().mu.unlock(); });
    return r;
  }();
  return *reg;
}

std::string meshKey(const wire::Secret& secret) {
  return std::to_string(getpid()) + "|" + std::string(secret.begin(), secret.end());
}

// The local address the kernel would use to reach `dst` (a UDP connect sends nothing).
ncclResult_t localAddressToward(const SockAddr& dst, SockAddr* out) {
  ForkClosedFd fd(socket(dst.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return fail(ncclSystemError, "bootstrap: socket() failed: %s", strerror(errno));
  if (connect(fd.get(), dst.sa(), dst.len) != 0)
    return fail(ncclSystemError, "bootstrap: no route to the job's store at %s: %s", dst.str().c_str(),
                strerror(errno));
  SockAddr local;
  local.len = sizeof(local.storage);
  if (getsockname(fd.get(), local.sa(), &local.len) != 0)
    return fail(ncclSystemError, "bootstrap: getsockname failed: %s", strerror(errno));
  local.setPort(0);
  *out = local;
  return ncclSuccess;
}

ncclResult_t startMailbox(const wire::Secret& secret, const SockAddr& jobStore, std::shared_ptr<TcpStoreServer>* out) {
  // This process serves the job's store: that server is the mailbox too.
  if (auto served = findRegisteredServer(jobStore, secret)) {
    *out = std::move(served);
    return ncclSuccess;
  }
  SockAddr where;
  CHORUS_CHECK(localAddressToward(jobStore, &where));
  TcpStoreServer::Options opts = serverOptionsFromParams();
  opts.lingerMaxMs = 0;  // peers only write to a mailbox while its ranks still wait for them
  CHORUS_CHECK(TcpStoreServer::start(where, secret, opts, out));
  return ncclSuccess;
}

}  // namespace

Mesh::Mesh(wire::Secret secret, SockAddr addr, std::shared_ptr<TcpStoreServer> server, std::shared_ptr<Store> local)
    : secret_(secret), addr_(addr), server_(std::move(server)), local_(std::move(local)) {}

Mesh::~Mesh() {
  std::lock_guard<std::mutex> lock(mu_);
  peers_.clear();
}

ncclResult_t Mesh::open(const wire::Secret& secret, const SockAddr& jobStore, std::shared_ptr<Mesh>* out) {
  MeshRegistry& reg = meshRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (auto it = reg.meshes.begin(); it != reg.meshes.end();)  // one entry per live mesh
    it = it->second.expired() ? reg.meshes.erase(it) : std::next(it);
  std::weak_ptr<Mesh>& slot = reg.meshes[meshKey(secret)];
  if (auto existing = slot.lock()) {
    *out = std::move(existing);
    return ncclSuccess;
  }
  std::shared_ptr<TcpStoreServer> server;
  CHORUS_CHECK(startMailbox(secret, jobStore, &server));
  std::shared_ptr<Store> local = server->attachLocal();
  if (local == nullptr)
    return fail(ncclInternalError, "bootstrap: the mailbox at %s stopped as soon as it started",
                server->address().str().c_str());
  std::shared_ptr<Mesh> mesh(new Mesh(secret, server->address(), server, std::move(local)));
  CHORUS_TRACE(kLogBootstrap, "bootstrap: mailbox of pid %d at %s", static_cast<int>(getpid()),
               mesh->addr_.str().c_str());
  slot = mesh;
  *out = std::move(mesh);
  return ncclSuccess;
}

ncclResult_t Mesh::peer(const SockAddr& addr, int rank, const WaitBound& bound, std::shared_ptr<Store>* out) {
  const std::string where = addr.str();
  if (where == addr_.str()) {
    *out = local_;
    return ncclSuccess;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(where);
    if (it != peers_.end()) {
      *out = it->second;
      return ncclSuccess;
    }
    if (gone_.count(where) != 0)
      return fail(ncclRemoteError, "bootstrap: rank %d's process is gone (its mailbox at %s closed the connection)",
                  rank, where.c_str());
  }
  std::shared_ptr<Store> client;
  if (connectTcpStore(addr, secret_, rank, bound, &client, kPeerConnectMs) != ncclSuccess) {
    const std::string why = lastErrorMessage();
    return fail(ncclRemoteError, "bootstrap: cannot reach rank %d's mailbox at %s (has its process exited?): %s", rank,
                where.c_str(), why.c_str());
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = peers_.emplace(where, std::move(client));
  *out = it->second;
  return ncclSuccess;
}

void Mesh::markGone(const SockAddr& addr) {
  std::lock_guard<std::mutex> lock(mu_);
  peers_.erase(addr.str());
  gone_.insert(addr.str());
}

void Mesh::setLive(const std::string& key, std::function<std::vector<uint8_t>()> value) {
  server_->data().setLive(key, std::move(value));
}

void Mesh::removeLive(const std::string& key) { server_->data().removeLive(key); }

size_t Mesh::heldKeys() const { return server_->data().size(); }

void Mesh::join(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  ++members_[prefix];
}

void Mesh::leave(const std::string& prefix) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = members_.find(prefix);
    if (it == members_.end() || --it->second > 0) return;
    members_.erase(it);
  }
  local_->erasePrefix(prefix + ":");
}

size_t meshHeldKeys(const wire::Secret& secret) {
  std::shared_ptr<Mesh> mesh;
  {
    MeshRegistry& reg = meshRegistry();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.meshes.find(meshKey(secret));
    if (it != reg.meshes.end()) mesh = it->second.lock();
  }
  return mesh ? mesh->heldKeys() : 0;
}

}  // namespace chorus
