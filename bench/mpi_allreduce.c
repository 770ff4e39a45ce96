/* mpi_allreduce.c -- Open MPI's own MPI_Allreduce, timed as bench/distributed.lua
 * times lunet's mpi backend: a float32 buffer of S bytes per rank, summed in
 * place, S / time (GB/s, 1e9 bytes; the algorithm bandwidth of nccl-tests).
 * Prints "mpi_allreduce <bytes> <seconds>" per run on rank 0.
 *   mpicc -O2 bench/mpi_allreduce.c -o build/bench_mpi_allreduce
 *   mpirun -np 2 build/bench_mpi_allreduce RUNS MB [MB ...] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int runs = argc > 1 ? atoi(argv[1]) : 5;
  for (int a = 2; a < argc; a++) {
    size_t bytes = (size_t)atof(argv[a]) * 1000000, n = bytes / 4;
    float *x = malloc(n * sizeof *x);
    if (!x) { fprintf(stderr, "mpi_allreduce: out of memory for %zu bytes\n", bytes); MPI_Abort(MPI_COMM_WORLD, 1); }
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7) * 1e-3f;
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);   /* warm-up: pages, connections */
    for (int r = 0; r < runs; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = MPI_Wtime() - t0;
      if (rank == 0) printf("mpi_allreduce %zu %.6f\n", n * 4, t);
    }
    free(x);
  }
  MPI_Finalize();
  return 0;
}
