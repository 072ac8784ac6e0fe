#include "common/world.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#ifdef CHORUS_BENCH_MPI
// Only the C bindings: the C++ ones are deprecated and do not build warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace chorus_bench {

#ifdef CHORUS_BENCH_MPI

bool worldInit(int* argc, char*** argv, ProcessWorld* world) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world->size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &world->localRank);
  MPI_Comm_free(&node);
  world->how = "MPI";
  return true;
}

ncclResult_t worldUniqueId(const ProcessWorld& world, ncclUniqueId* id) {
  ncclResult_t res = ncclSuccess;
  if (world.rank == 0) res = ncclGetUniqueId(id);
  // Everyone learns whether the root got an id before trusting the bytes.
  int ok = res == ncclSuccess;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return world.rank == 0 ? res : ncclSystemError;
  MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return ncclSuccess;
}

void worldFinalize() { MPI_Finalize(); }

void worldAbort(int code) {
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else

namespace {

struct EnvPair {
  const char* rank;
  const char* size;
};
// First match wins: our own names, then the torchrun-style ones, then
// what OpenMPI's mpirun exports to each process.
const EnvPair kEnvPairs[] = {
    {"CHORUS_RANK", "CHORUS_WORLD_SIZE"},
    {"RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
};

bool envInt(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno || *end != '\0' || x < 0 || x > (1 << 24)) return false;
  *out = static_cast<int>(x);
  return true;
}

bool envWorld(ProcessWorld* world) {
  for (const EnvPair& p : kEnvPairs) {
    const bool hasRank = std::getenv(p.rank) != nullptr;
    const bool hasSize = std::getenv(p.size) != nullptr;
    if (!hasRank && !hasSize) continue;
    int rank = -1;
    int size = 0;
    if (!envInt(p.rank, &rank) || !envInt(p.size, &size) || size < 1 || rank >= size) {
      std::fprintf(stderr, "chorus benchmarks: %s/%s must be set together, with 0 <= rank < size\n", p.rank, p.size);
      return false;
    }
    world->rank = rank;
    world->size = size;
    world->localRank = rank;
    for (const char* local : {"CHORUS_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})
      if (envInt(local, &world->localRank)) break;
    world->how = "environment rendezvous";
    if (size > 1 && !std::getenv("NCCL_COMM_ID")) {
      std::fprintf(stderr,
                   "chorus benchmarks: %s=%d processes need NCCL_COMM_ID=host:port so that they agree on "
                   "one unique id (chorusrun sets it; under mpirun use the *_mpi tools)\n",
                   p.size, size);
      return false;
    }
    return true;
  }
  return true;  // nothing set: a single process
}

}  // namespace

bool worldInit(int*, char***, ProcessWorld* world) { return envWorld(world); }

ncclResult_t worldUniqueId(const ProcessWorld&, ncclUniqueId* id) {
  // With NCCL_COMM_ID set every process computes the same id; alone, the
  // id is simply shared by this process's threads.
  return ncclGetUniqueId(id);
}

void worldFinalize() {}

void worldAbort(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

#endif

}  // namespace chorus_bench
