/* The cluster's self-check: time an in-place MPI_Allreduce of SIZE MiB of
 * floats (default 64) across all ranks and print, from rank 0, one line
 *   allreduce_probe ranks P MiB S seconds T
 * (the slowest rank's time of the fastest of REPEATS runs, default 1).
 * scripts/cluster.sh compares T with the time the link cap allows. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const int mib = argc > 1 ? atoi(argv[1]) : 64;
    const int repeats = argc > 2 ? atoi(argv[2]) : 1;
    const size_t n = (size_t)mib * 1048576 / sizeof(float);
    float *buf = malloc(n * sizeof(float));
    if (mib <= 0 || repeats <= 0 || !buf) {
        fprintf(stderr, "allreduce_probe: usage: allreduce_probe [MiB [REPEATS]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
    /* A small warm-up connects the ranks, so the timed run moves data only. */
    MPI_Allreduce(MPI_IN_PLACE, buf, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (t < best) best = t;
    }
    if (rank == 0) printf("allreduce_probe ranks %d MiB %d seconds %.4f\n", ranks, mib, best);
    free(buf);
    MPI_Finalize();
    return 0;
}
