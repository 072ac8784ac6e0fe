#include "transports/shm/shm_leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/log.h"

namespace chorus {
namespace {

constexpr const char kPrefix[] = "chorus-";

// Inode of this process's pid namespace; 0 when /proc does not tell.
unsigned long long pidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

// Reads "<digits>" at *p, moving past it; false without digits.
bool readNumber(const char** p, unsigned long long* out) {
  if (**p < '0' || **p > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(*p, &end, 10);
  if (errno != 0) return false;
  *out = v;
  *p = end;
  return true;
}

// Reads a segment name chorus-<pid>-p<ns>-<peer>-<self>-<n>: false when
// `name` is not one.
bool parseSegmentName(const char* name, unsigned long long* pid, unsigned long long* ns) {
  const char* p = name;
  for (const char* k = kPrefix; *k; ++k, ++p)
    if (*p != *k) return false;
  if (!readNumber(&p, pid) || *p++ != '-' || *p++ != 'p' || !readNumber(&p, ns) || *p != '-') return false;
  for (++p; *p != '\0'; ++p)
    if ((*p < '0' || *p > '9') && *p != '-') return false;
  return *pid != 0 && *pid <= 0x3fffffff;
}

// The owner pid of a segment made in namespace `ns`, or 0 when the name is
// not one.
pid_t ownerOf(const char* name, unsigned long long ns) {
  unsigned long long pid = 0, nameNs = 0;
  if (!parseSegmentName(name, &pid, &nameNs) || nameNs != ns) return 0;
  return static_cast<pid_t>(pid);
}

bool isLeftover(int dirFd, const char* name, unsigned long long ns) {
  const pid_t owner = ownerOf(name, ns);
  if (owner == 0 || owner == getpid()) return false;
  struct stat st {};
  if (fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
    return false;
  return kill(owner, 0) != 0 && errno == ESRCH;
}

}  // namespace

std::string shmSegmentPrefix() {
  return std::string(kPrefix) + std::to_string(getpid()) + "-p" + std::to_string(pidNamespace()) + "-";
}

bool isSegmentPathOf(const std::string& path, int ownerPid) {
  const size_t slash = path.rfind('/');
  if (path.find('\0') != std::string::npos || slash == std::string::npos || slash + 1 >= path.size()) return false;
  unsigned long long pid = 0, ns = 0;
  const char* name = path.c_str() + slash + 1;
  // The owner writes its pid without leading zeros, so the name starts with
  // exactly this (which also makes the parsed pid the owner's).
  const std::string start = std::string(kPrefix) + std::to_string(ownerPid) + "-p";
  return std::strncmp(name, start.c_str(), start.size()) == 0 && parseSegmentName(name, &pid, &ns);
}

int removeLeftoverSegments(const std::string& dir) {
  const unsigned long long ns = pidNamespace();
  if (ns == 0) return 0;  // cannot tell whose pids the names hold
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return 0;
  int removed = 0;
  std::string example;
  while (const dirent* e = readdir(d.get())) {
    if (!isLeftover(dirfd(d.get()), e->d_name, ns)) continue;
    if (unlinkat(dirfd(d.get()), e->d_name, 0) != 0) continue;
    if (removed++ == 0) example = e->d_name;
  }
  if (removed > 0)
    CHORUS_INFO(kLogShm, "shm: removed %d segment(s) left in %s by exited processes (e.g. %s)", removed, dir.c_str(),
                example.c_str());
  return removed;
}

}  // namespace chorus
