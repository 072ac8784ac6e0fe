// Shared-memory transport. The receiver creates a file in CHORUS_SHM_DIR
// (default /dev/shm), reserves its pages with posix_fallocate — so a tmpfs that
// is too small fails here with a clear message instead of a SIGBUS on first
// touch — maps it and sends the file name as the handle. The sender maps it
// and unlinks the name at once, so no segment outlives the two processes even
// if they are killed; the receiver also unlinks on teardown in case the
// sender never came. What a crash between the two leaves behind, the next
// process removes (shm_leftovers.h).
//
// GPU mode (ranks that cannot use P2P): kernels use the segment, so each side
// pins and maps its own mapping of it (host_fifo_mapping.h) and hands the
// executor the device addresses. The fresh file reads as zeros, which is a
// valid fresh FIFO for the kernels too.
#include "transports/shm/shm_transport.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "core/params.h"
#include "core/result.h"
#include "transport/host_fifo_mapping.h"
#include "transports/shm/shm_leftovers.h"

namespace chorus {
namespace {

std::string segmentPath(const ConnRequest& req) {
  static std::atomic<uint64_t> counter{0};
  return params::shmDir() + "/" + shmSegmentPrefix() + std::to_string(req.peerRank) + "-" +
         std::to_string(req.selfRank) + "-" + std::to_string(counter.fetch_add(1));
}

// Once per process, before its first segment: what dead processes left.
void cleanUpOnce() {
  static std::once_flag once;
  std::call_once(once, [] { removeLeftoverSegments(params::shmDir()); });
}

std::shared_ptr<void> mapShared(int fd, size_t bytes, const std::string& unlinkOnRelease) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<void>(p, [bytes, unlinkOnRelease](void* q) {
    munmap(q, bytes);
    if (!unlinkOnRelease.empty()) unlink(unlinkOnRelease.c_str());
  });
}

ncclResult_t reportNoSpace(const std::string& path, size_t bytes, int err) {
  struct statvfs vfs {};
  std::string dir = params::shmDir();
  unsigned long long freeMiB = 0;
  if (statvfs(dir.c_str(), &vfs) == 0) freeMiB = (unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20;
  return fail(ncclSystemError,
              "shm: %s%s: cannot reserve a %zu KiB segment (%s; %llu MiB free). Enlarge it (e.g. docker run "
              "--shm-size=1g), point CHORUS_SHM_DIR at a larger tmpfs, or lower CHORUS_SLOTS / CHORUS_SLOT_BYTES",
              dir.c_str(), err == ENOSPC ? " is full" : "", bytes >> 10, strerror(err), freeMiB);
}

FifoEnd viewOf(const std::shared_ptr<void>& mem, int peer, int peerPid) {
  FifoEnd end;
  end.ctl = static_cast<FifoControl*>(mem.get());
  end.slots = static_cast<char*>(mem.get()) + fifoControlBytes();
  end.slotBytes = end.ctl->slotBytes;
  end.nslots = end.ctl->nslots;
  end.peer = peer;
  end.peerPid = peerPid;
  end.memory = mem;
  return end;
}

}  // namespace

bool ShmTransport::canConnect(const PeerInfo& self, const PeerInfo& peer) const {
  return self.hostHash == peer.hostHash && params::shmDisable() == 0;
}

ncclResult_t ShmTransport::createRecv(const ConnRequest& req, const PeerInfo& peer, FifoEnd* end,
                                      std::vector<uint8_t>* handle) {
  cleanUpOnce();
  const size_t bytes = fifoTotalBytes(req.slotBytes, req.nslots);
  const std::string path = segmentPath(req);
  int fd = open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return fail(ncclSystemError, "shm: cannot create %s: %s", path.c_str(), strerror(errno));
  int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    unlink(path.c_str());
    return reportNoSpace(path, bytes, err);
  }
  std::shared_ptr<void> mem = mapShared(fd, bytes, path);
  close(fd);
  if (!mem) {
    unlink(path.c_str());
    return fail(ncclSystemError, "shm: mmap of %s failed: %s", path.c_str(), strerror(errno));
  }
  fifoInit(mem.get(), req.slotBytes, req.nslots, getpid());
  *end = viewOf(mem, req.peerRank, peer.pid);
  CHORUS_CHECK(mapFifoEndForKernels(req, "shm", end));
  handle->assign(path.begin(), path.end());
  CHORUS_INFO(kLogShm, "shm: %s uses %s (%zu KiB)", req.label.c_str(), path.c_str(), bytes >> 10);
  return ncclSuccess;
}

ncclResult_t ShmTransport::connectSend(const ConnRequest& req, const PeerInfo& peer, const std::vector<uint8_t>& handle,
                                       FifoEnd* end) {
  const std::string path(handle.begin(), handle.end());
  if (handle.size() > 4096 || !isSegmentPathOf(path, peer.pid))
    return fail(ncclInternalError,
                "shm: %s: rank %d (pid %d) sent a handle that names no segment of its own (%zu bytes)",
                req.label.c_str(), req.peerRank, peer.pid, handle.size());
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return fail(ncclSystemError, "shm: cannot open %s for %s: %s", path.c_str(), req.label.c_str(), strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) < fifoControlBytes()) {
    close(fd);
    return fail(ncclSystemError, "shm: segment %s for %s is truncated", path.c_str(), req.label.c_str());
  }
  std::shared_ptr<void> mem = mapShared(fd, static_cast<size_t>(st.st_size), "");
  close(fd);
  unlink(path.c_str());  // both ends are attached (or the receiver died): the name is no longer needed
  if (!mem) return fail(ncclSystemError, "shm: mmap of %s failed: %s", path.c_str(), strerror(errno));
  auto* ctl = static_cast<FifoControl*>(mem.get());
  if (ctl->magic != kFifoMagic || fifoTotalBytes(ctl->slotBytes, ctl->nslots) > static_cast<size_t>(st.st_size))
    return fail(ncclSystemError, "shm: segment %s for %s is not a Chorus FIFO", path.c_str(), req.label.c_str());
  CHORUS_CHECK(checkPeerSlots("shm", req, ctl->slotBytes, ctl->nslots));
  ctl->senderPid = getpid();
  *end = viewOf(mem, req.peerRank, peer.pid);
  return mapFifoEndForKernels(req, "shm", end);
}

}  // namespace chorus
