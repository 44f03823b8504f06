/* The OpenMPI peer of `dsx bench comm`: MPI_Allreduce (in place, float sum) per size, the same
 * sizes, warm-up and iteration counts. Prints "bytes microseconds" per line on rank 0; the time
 * is the slowest rank's average. Usage: mpirun -np 2 mpi_allreduce MINBYTES MAXBYTES ITERS WARMUP */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long min_bytes = argc > 1 ? atol(argv[1]) : 4096, max_bytes = argc > 2 ? atol(argv[2]) : 64 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 20, warmup = argc > 4 ? atoi(argv[4]) : 5;
  float* data = malloc((size_t)max_bytes);
  for (long i = 0; i < max_bytes / 4; ++i) data[i] = (float)(i % 7);
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    int count = (int)(bytes / 4);
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - start) / iters, slowest;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.3f\n", bytes, slowest * 1e6);
  }
  free(data);
  MPI_Finalize();
  return 0;
}
