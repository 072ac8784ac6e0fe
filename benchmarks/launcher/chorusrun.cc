// chorusrun: start N copies of a program as the processes of one Chorus job
// on this machine, without MPI.
//
//   chorusrun -n N [--port P] [--bind-to core|none] [--report-bindings] [--] program [args...]
//   chorusrun -n N --nnodes K --node-rank I --master HOST:PORT [--map-by slot|node] program ...
//
// Each child gets NCCL_COMM_ID=127.0.0.1:<port> (a free loopback port unless
// --port is given), CHORUS_RANK=i and CHORUS_WORLD_SIZE=N, which is all the
// benchmark tools (and any program using ncclGetUniqueId with NCCL_COMM_ID)
// need to form one communicator.
//
// Across machines, run one chorusrun per machine with the same --nnodes and
// --master (an address of the node-rank-0 machine and a free port there) and
// that machine's --node-rank. The job has N*K ranks; --map-by slot (default)
// numbers a machine's processes consecutively (node I holds ranks I*N ..
// I*N+N-1), --map-by node deals ranks round-robin over machines (rank = i*K+I),
// as mpirun's options of the same names do. CHORUS_LOCAL_RANK tells a process
// its index on its machine. Signals sent to chorusrun are forwarded to
// the children. --bind-to core (the default without --nnodes; --bind-to
// none or CHORUS_BIND_TO=none turns it off) pins local process i to core i
// of the CPUs chorusrun may use, as mpirun does, when every process gets a
// core of its own (launcher/cpu_binding.h says why). If a child fails, the others are
// terminated (SIGTERM, then SIGKILL after a grace period) and chorusrun exits
// with the first failure's status (128 + signal number for a child killed by
// a signal). If chorusrun itself dies, even by SIGKILL, the kernel kills its
// children (PR_SET_PDEATHSIG), so no rank is left spinning.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "launcher/cpu_binding.h"

namespace {

constexpr int kMaxProcs = 4096;
constexpr auto kGrace = std::chrono::seconds(5);

// Children, readable from the signal handler.
pid_t gChildren[kMaxProcs];
volatile sig_atomic_t gChildCount = 0;
volatile sig_atomic_t gSignal = 0;

void forwardSignal(int sig) {
  gSignal = sig;
  for (int i = 0; i < gChildCount; ++i)
    if (gChildren[i] > 0) kill(-gChildren[i], sig);  // each child leads its own process group
}

void installForwarding() {
  struct sigaction sa {};
  sa.sa_handler = forwardSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);
}

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: chorusrun -n N [--port P] [--bind-to core|none] [--report-bindings] [--] program [args...]\n"
               "       chorusrun -n N --nnodes K --node-rank I --master HOST:PORT [--map-by slot|node] program ...\n"
               "  Starts N processes of one job on this machine. Each gets\n"
               "  NCCL_COMM_ID=127.0.0.1:<port>, CHORUS_RANK and CHORUS_WORLD_SIZE.\n"
               "  With --nnodes, run one chorusrun per machine: the job has N*K ranks and\n"
               "  rendezvous at --master (an address of node 0; node 0 listens on it).\n"
               "  --bind-to core (default without --nnodes; or CHORUS_BIND_TO): pin process i\n"
               "  to core i when every process gets a core of its own; none: leave placement\n"
               "  to the OS. --report-bindings prints where each process goes.\n"
               "  Exits non-zero (and stops the others) when any process fails.\n");
}

// A loopback port nobody listens on right now. Another program could take
// it before rank 0 binds it; the window is short enough for a launcher.
int pickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

struct Args {
  int nprocs = 0;
  int port = 0;
  int nnodes = 1;
  int nodeRank = 0;
  bool mapByNode = false;
  chorusrun::BindMode bind = chorusrun::BindMode::kCore;
  bool bindGiven = false;  // set by --bind-to or CHORUS_BIND_TO, not by default
  bool reportBindings = false;
  std::string master;  // HOST:PORT of the bootstrap root when nnodes > 1
  int first = 0;       // index in argv of the program

  int worldSize() const { return nprocs * nnodes; }
  int globalRank(int local) const { return mapByNode ? local * nnodes + nodeRank : nodeRank * nprocs + local; }
};

// CHORUS_BIND_TO applies unless --bind-to was given. With neither, one
// chorusrun binds and one of several (--nnodes) does not: those may share a
// machine (as the network-namespace tests do) and would all start at core 0.
bool bindFromEnv(Args* a) {
  const char* env = std::getenv("CHORUS_BIND_TO");
  if (a->bindGiven) return true;
  if (env == nullptr || *env == '\0') {
    if (a->nnodes > 1) a->bind = chorusrun::BindMode::kNone;
    return true;
  }
  a->bindGiven = true;
  if (chorusrun::parseBindMode(env, &a->bind)) return true;
  std::fprintf(stderr, "chorusrun: CHORUS_BIND_TO takes core or none, not %s\n", env);
  return false;
}

bool parseArgs(int argc, char** argv, Args* a) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--") {
      ++i;
      break;
    }
    if ((s == "-n" || s == "-np" || s == "--np") && i + 1 < argc) {
      a->nprocs = std::atoi(argv[++i]);
    } else if (s == "--port" && i + 1 < argc) {
      a->port = std::atoi(argv[++i]);
    } else if (s == "--nnodes" && i + 1 < argc) {
      a->nnodes = std::atoi(argv[++i]);
    } else if (s == "--node-rank" && i + 1 < argc) {
      a->nodeRank = std::atoi(argv[++i]);
    } else if (s == "--master" && i + 1 < argc) {
      a->master = argv[++i];
    } else if (s == "--map-by" && i + 1 < argc) {
      const std::string how = argv[++i];
      if (how != "node" && how != "slot") {
        std::fprintf(stderr, "chorusrun: --map-by takes slot or node, not %s\n", how.c_str());
        return false;
      }
      a->mapByNode = how == "node";
    } else if (s == "--bind-to" && i + 1 < argc) {
      if (!chorusrun::parseBindMode(argv[++i], &a->bind)) {
        std::fprintf(stderr, "chorusrun: --bind-to takes core or none, not %s\n", argv[i]);
        return false;
      }
      a->bindGiven = true;
    } else if (s == "--report-bindings") {
      a->reportBindings = true;
    } else if (s == "-h" || s == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (!s.empty() && s[0] == '-') {
      std::fprintf(stderr, "chorusrun: unknown option %s\n", s.c_str());
      return false;
    } else {
      break;
    }
  }
  a->first = i;
  if (a->nprocs < 1 || a->nprocs > kMaxProcs || i >= argc || a->port < 0 || a->port > 65535) return false;
  if (a->nnodes < 1 || a->nodeRank < 0 || a->nodeRank >= a->nnodes) {
    std::fprintf(stderr, "chorusrun: --node-rank must be in [0, --nnodes)\n");
    return false;
  }
  if (a->nnodes > 1 && a->master.empty()) {
    std::fprintf(stderr, "chorusrun: --nnodes > 1 needs --master HOST:PORT (an address of node 0)\n");
    return false;
  }
  return bindFromEnv(a);
}

// The CPUs of each local process (empty lists: unbound).
std::vector<std::vector<int>> bindingPlan(const Args& a) {
  const std::vector<std::vector<int>> cores = chorusrun::allowedCores();
  auto plan = chorusrun::planBinding(a.bind, a.nprocs, cores);
  if (a.bind == chorusrun::BindMode::kCore && a.nprocs > static_cast<int>(cores.size()) &&
      (a.bindGiven || a.reportBindings))
    std::fprintf(stderr, "chorusrun: %d processes on %zu cores: not binding them\n", a.nprocs, cores.size());
  return plan;
}

// The child dies with chorusrun (even a kill -9 of it, which nothing could
// forward): PR_SET_PDEATHSIG, kept across exec. If chorusrun died between
// fork() and prctl() the signal would never come: then the parent is no
// longer `launcher`, and the child leaves at once.
void dieWithLauncher(pid_t launcher) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
    std::fprintf(stderr, "chorusrun: PR_SET_PDEATHSIG failed: %s\n", std::strerror(errno));
  if (getppid() != launcher) std::_Exit(128 + SIGKILL);
}

[[noreturn]] void execChild(const Args& a, int local, const std::string& commId, const std::vector<int>& cpus,
                            pid_t launcher, char** argv) {
  dieWithLauncher(launcher);
  setpgid(0, 0);
  if (!chorusrun::bindSelf(cpus))
    std::fprintf(stderr, "chorusrun: cannot bind local process %d to CPUs %s: %s\n", local,
                 chorusrun::cpuListText(cpus).c_str(), std::strerror(errno));
  setenv("NCCL_COMM_ID", commId.c_str(), 1);
  setenv("CHORUS_RANK", std::to_string(a.globalRank(local)).c_str(), 1);
  setenv("CHORUS_WORLD_SIZE", std::to_string(a.worldSize()).c_str(), 1);
  setenv("CHORUS_LOCAL_RANK", std::to_string(local).c_str(), 1);
  execvp(argv[a.first], argv + a.first);
  std::fprintf(stderr, "chorusrun: cannot run %s: %s\n", argv[a.first], std::strerror(errno));
  std::_Exit(127);
}

int statusCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void signalAll(int sig) {
  for (int i = 0; i < gChildCount; ++i)
    if (gChildren[i] > 0) kill(-gChildren[i], sig);
}

// Reaps children until none is left; returns the first failure's code.
int reap(int nprocs) {
  int alive = nprocs;
  int firstFailure = 0;
  bool stopping = false;
  auto deadline = std::chrono::steady_clock::now();
  while (alive > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (stopping && std::chrono::steady_clock::now() > deadline) signalAll(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    --alive;
    for (int i = 0; i < nprocs; ++i)
      if (gChildren[i] == pid) {
        if (statusCode(status) != 0 && firstFailure == 0 && !stopping)
          std::fprintf(stderr, "chorusrun: rank %d (pid %d) failed with status %d; stopping the others\n", i,
                       static_cast<int>(pid), statusCode(status));
        gChildren[i] = -1;
      }
    if (statusCode(status) != 0 && firstFailure == 0) firstFailure = statusCode(status);
    if (firstFailure != 0 && !stopping) {
      stopping = true;
      deadline = std::chrono::steady_clock::now() + kGrace;
      signalAll(SIGTERM);
    }
  }
  return firstFailure;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parseArgs(argc, argv, &a)) {
    usage(stderr);
    return 2;
  }
  std::string commId = a.master;
  if (commId.empty()) {
    const int port = a.port ? a.port : pickFreePort();
    if (port <= 0) {
      std::fprintf(stderr, "chorusrun: cannot find a free loopback port: %s\n", std::strerror(errno));
      return 1;
    }
    commId = "127.0.0.1:" + std::to_string(port);
  }
  const std::vector<std::vector<int>> binding = bindingPlan(a);
  if (a.reportBindings)
    for (int i = 0; i < a.nprocs; ++i)
      std::fprintf(stderr, "chorusrun: local process %d (rank %d): %s\n", i, a.globalRank(i),
                   binding[i].empty() ? "not bound" : ("CPUs " + chorusrun::cpuListText(binding[i])).c_str());
  installForwarding();
  const pid_t launcher = getpid();
  for (int rank = 0; rank < a.nprocs; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "chorusrun: fork failed: %s\n", std::strerror(errno));
      signalAll(SIGTERM);
      reap(rank);
      return 1;
    }
    if (pid == 0) execChild(a, rank, commId, binding[rank], launcher, argv);
    setpgid(pid, pid);  // also from the parent, so forwarding never races the child's own call
    gChildren[rank] = pid;
    gChildCount = rank + 1;
  }
  const int code = reap(a.nprocs);
  if (code != 0) return code;
  return gSignal ? 128 + gSignal : 0;
}
