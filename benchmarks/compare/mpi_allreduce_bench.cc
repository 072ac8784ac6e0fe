// OpenMPI reference point for all_reduce_perf: MPI_Allreduce on float sums
// over the same sizes, printed in the same columns.
//
//   mpirun -np 2 mpi_allreduce_bench [-b 8] [-e 256M] [-f 2] [-n 20] [-w 5] [-c 1]
//
// Times are the mean over ranks of (elapsed / iterations), like the Chorus
// tools' default (-a 1). Nothing special is asked of MPI: its default
// shared-memory path is what is compared.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>
#include <vector>

#include "compare/sweep.h"

namespace {

using compare::SweepOptions;

double timeAllreduce(const float* in, float* out, size_t count, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    MPI_Allreduce(in ? in : MPI_IN_PLACE, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double us = (MPI_Wtime() - start) * 1e6 / iters;
  int nranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  double sum = 0;
  MPI_Allreduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / nranks;
}

// Wrong elements over all ranks after one checked run.
long checkAllreduce(std::vector<float>& in, std::vector<float>& out, size_t count, bool inPlace, int rank, int nranks) {
  for (size_t i = 0; i < count; ++i) {
    (inPlace ? out : in)[i] = compare::inputValue(rank, i);
    if (!inPlace) out[i] = -1.0f;
  }
  MPI_Allreduce(inPlace ? MPI_IN_PLACE : in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += out[i] != compare::expectedSum(nranks, i);
  long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  SweepOptions o;
  if (!compare::parseSweep(argc, argv, &o)) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: mpi_allreduce_bench [-b min] [-e max] [-f factor] [-n iters] [-w warmup] "
                   "[-c 0/1]\n");
    MPI_Finalize();
    return 2;
  }
  const size_t maxCount = o.maxBytes / sizeof(float);
  std::vector<float> in(maxCount + 1, 1.0f);
  std::vector<float> out(maxCount + 1, 0.0f);
  if (rank == 0) compare::printHeader("OpenMPI MPI_Allreduce", nranks, o);
  if (o.warmup > 0) timeAllreduce(in.data(), out.data(), maxCount, o.warmup);
  long wrongTotal = 0;
  double bwSum = 0;
  int rows = 0;
  for (size_t bytes : compare::sweepSizes(o)) {
    const size_t count = bytes / sizeof(float);
    const double oop = timeAllreduce(in.data(), out.data(), count, o.iters);
    const long wOop = o.check ? checkAllreduce(in, out, count, false, rank, nranks) : 0;
    const double ip = timeAllreduce(nullptr, out.data(), count, o.iters);
    const long wIp = o.check ? checkAllreduce(in, out, count, true, rank, nranks) : 0;
    wrongTotal += wOop + wIp;
    bwSum += compare::busBw(count * sizeof(float), oop, nranks) + compare::busBw(count * sizeof(float), ip, nranks);
    rows += 2;
    if (rank == 0) {
      compare::printRowStart(count * sizeof(float), count);
      compare::printHalf(count * sizeof(float), oop, nranks, wOop, o.check != 0);
      compare::printHalf(count * sizeof(float), ip, nranks, wIp, o.check != 0);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (rank == 0) compare::printSummary(wrongTotal, rows ? bwSum / rows : 0);
  MPI_Finalize();
  return wrongTotal ? 1 : 0;
}
