// This process's place among the benchmark's processes, and how they agree
// on one ncclUniqueId.
//
// Three ways to start:
//  - alone: one process, every rank a thread of it;
//  - environment rendezvous: CHORUS_RANK / CHORUS_WORLD_SIZE (or RANK /
//    WORLD_SIZE, or OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE) name the
//    process, and NCCL_COMM_ID=host:port makes ncclGetUniqueId return the
//    same id everywhere (process 0 serves the bootstrap there). chorusrun
//    sets all three;
//  - MPI (the *_mpi tools, built with CHORUS_BENCH_MPI): process 0's id is
//    broadcast with MPI_Bcast.
#pragma once

#include "nccl.h"

namespace chorus_bench {

struct ProcessWorld {
  int rank = 0;
  int size = 1;
  // This process's index among the job's processes on this machine, which
  // picks its GPUs (CHORUS_LOCAL_RANK from chorusrun, LOCAL_RANK, OpenMPI's
  // local rank, or the node-local rank under MPI; `rank` when none is known).
  int localRank = 0;
  const char* how = "single process";  // for the header
};

// Finds this process's rank and the process count. False (after printing
// why) when the environment is inconsistent.
bool worldInit(int* argc, char*** argv, ProcessWorld* world);

// The id every rank of the job passes to ncclCommInitRank.
ncclResult_t worldUniqueId(const ProcessWorld& world, ncclUniqueId* id);

// Orderly end (MPI_Finalize under MPI).
void worldFinalize();

// Ends the whole job now after a fatal error: MPI_Abort under MPI; otherwise
// this process exits and the launcher (or the library's timeouts) stops the rest.
[[noreturn]] void worldAbort(int code);

}  // namespace chorus_bench
