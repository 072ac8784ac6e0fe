// chorus-init-bench: how long communicator creation takes with N ranks as
// processes of this machine. The parent only creates the unique id (like a
// launcher would); N forked children each run ncclCommInitRank, one small
// all-reduce and ncclCommDestroy. Uses the public API only, so the same source
// measures any build of the library.
//
//   chorus-init-bench NRANKS [REPEATS]
//
// Prints, per repeat, the time from the fork of the first child until every
// rank's ncclCommInitRank had returned, and until every rank had finished;
// then the medians.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "chorus/chorus.h"
#include "nccl.h"

namespace {

double nowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Report {
  double initDone = 0, allDone = 0;
  int ok = 0;
};

int runRank(int rank, int nranks, const ncclUniqueId& id, int out) {
  ncclComm_t comm = nullptr;
  double times[2] = {0, 0};
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  times[0] = nowMs();
  float x = 1.0f;
  if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess || x != static_cast<float>(nranks)) {
    fprintf(stderr, "rank %d: all-reduce failed (%g): %s\n", rank, x, ncclGetLastError(nullptr));
    return 1;
  }
  if (ncclCommDestroy(comm) != ncclSuccess) return 1;
  times[1] = nowMs();
  return write(out, times, sizeof(times)) == static_cast<ssize_t>(sizeof(times)) ? 0 : 1;
}

Report runOnce(int nranks) {
  Report rep;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
    return rep;
  }
  int fds[2];
  if (pipe(fds) != 0) return rep;
  fflush(nullptr);
  const double t0 = nowMs();
  std::vector<pid_t> kids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      _exit(runRank(r, nranks, id, fds[1]));
    }
    kids.push_back(pid);
  }
  close(fds[1]);
  double t[2];
  while (read(fds[0], t, sizeof(t)) == static_cast<ssize_t>(sizeof(t))) {
    rep.initDone = std::max(rep.initDone, t[0] - t0);
    rep.allDone = std::max(rep.allDone, t[1] - t0);
    ++rep.ok;
  }
  close(fds[0]);
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  usleep(200 * 1000);  // lets the id's store notice its last client left (its log line counts requests)
  return rep;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s NRANKS [REPEATS]\n", argv[0]);
    return 2;
  }
  const int nranks = atoi(argv[1]);
  const int repeats = argc > 2 ? atoi(argv[2]) : 3;
  chorusSetDefaultMode(chorusModeHost);
  std::vector<double> init, all;
  for (int i = 0; i < repeats; ++i) {
    Report r = runOnce(nranks);
    if (r.ok != nranks) {
      fprintf(stderr, "repeat %d: only %d of %d ranks finished\n", i, r.ok, nranks);
      return 1;
    }
    printf("nranks %d repeat %d: init %.1f ms, init+allreduce+destroy %.1f ms\n", nranks, i, r.initDone, r.allDone);
    init.push_back(r.initDone);
    all.push_back(r.allDone);
  }
  printf("nranks %d median of %d: init %.1f ms, init+allreduce+destroy %.1f ms\n", nranks, repeats, median(init),
         median(all));
  return 0;
}
